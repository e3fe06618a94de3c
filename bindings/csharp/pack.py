#!/usr/bin/env python3
"""Packs the C# binding into a NuGet package (a zip), laid out as `dotnet pack` lays out
Soe.csproj, for machines without the .NET SDK (CI: `cargo xtask csharp`):

    Soe.nuspec
    lib/netstandard2.1/Soe.dll, Soe.xml
    runtimes/<rid>/native/libsoe.so | libsoe.dylib | soe.dll   (one per --native)
    [Content_Types].xml, _rels/.rels

    pack.py --dll Soe.dll --xml Soe.xml --native [RID=]FILE... --out DIR

Each --native names a built library and the runtime it is for (RID: one of RUNTIMES; without
one, linux-x64): `--native win-x64=target/cross/x86_64-pc-windows-gnu/soe.dll`. The file is
stored under the name the binding's [DllImport("soe")] finds on that platform. The version
and the metadata come from Soe.csproj; prints the package's path.
"""
import argparse
import os
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The runtimes the package carries a native library for, and that library's name there.
RUNTIMES = {
    "win-x64": "soe.dll",
    "linux-x64": "libsoe.so",
    "linux-musl-x64": "libsoe.so",
    "linux-arm64": "libsoe.so",
    "osx-x64": "libsoe.dylib",
    "osx-arm64": "libsoe.dylib",
}


def csproj_property(text, name):
    match = re.search(r"<%s>(.*?)</%s>" % (name, name), text, re.S)
    if not match:
        sys.exit("Soe.csproj has no <%s>" % name)
    return match.group(1).strip()


def nuspec(project):
    fields = {n: csproj_property(project, n) for n in
              ("PackageId", "Version", "Authors", "Description", "PackageLicenseExpression")}
    return """<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://schemas.microsoft.com/packaging/2013/05/nuspec.xsd">
  <metadata>
    <id>{PackageId}</id>
    <version>{Version}</version>
    <authors>{Authors}</authors>
    <description>{Description}</description>
    <license type="expression">{PackageLicenseExpression}</license>
    <dependencies>
      <group targetFramework=".NETStandard2.1" />
    </dependencies>
  </metadata>
</package>
""".format(**fields), fields


CONTENT_TYPES = """<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
  <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml" />
  <Default Extension="nuspec" ContentType="application/octet" />
  <Default Extension="dll" ContentType="application/octet" />
  <Default Extension="xml" ContentType="application/octet" />
  <Default Extension="so" ContentType="application/octet" />
  <Default Extension="dylib" ContentType="application/octet" />
</Types>
"""

RELS = """<?xml version="1.0" encoding="utf-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/{id}.nuspec" Id="R0" />
</Relationships>
"""


def main():
    parser = argparse.ArgumentParser()
    for name in ("--dll", "--xml", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--native", required=True, action="append", metavar="[RID=]FILE")
    args = parser.parse_args()
    natives = {}
    for spec in args.native:
        rid, _, path = spec.rpartition("=") if "=" in spec else ("linux-x64", "", spec)
        if rid not in RUNTIMES:
            sys.exit("pack.py: unknown runtime %r (known: %s)" % (rid, ", ".join(RUNTIMES)))
        if rid in natives:
            sys.exit("pack.py: two libraries for %s" % rid)
        natives[rid] = path
    with open(os.path.join(HERE, "Soe.csproj")) as f:
        project = f.read()
    spec, fields = nuspec(project)
    path = os.path.join(args.out, "%s.%s.nupkg" % (fields["PackageId"], fields["Version"]))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", CONTENT_TYPES)
        z.writestr("_rels/.rels", RELS.format(id=fields["PackageId"]))
        z.writestr("%s.nuspec" % fields["PackageId"], spec)
        z.write(args.dll, "lib/netstandard2.1/Soe.dll")
        z.write(args.xml, "lib/netstandard2.1/Soe.xml")
        for rid, native in sorted(natives.items()):
            z.write(native, "runtimes/%s/native/%s" % (rid, RUNTIMES[rid]))
    print(path)


if __name__ == "__main__":
    main()
