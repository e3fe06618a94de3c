#!/usr/bin/env python3
"""Packs the C# binding into a NuGet package (a zip), laid out as `dotnet pack` lays out
Soe.csproj, for machines without the .NET SDK (CI: `cargo xtask csharp`):

    Soe.nuspec
    lib/netstandard2.1/Soe.dll, Soe.xml
    runtimes/linux-x64/native/libsoe.so
    [Content_Types].xml, _rels/.rels

    pack.py --dll Soe.dll --xml Soe.xml --native libsoe.so.0.3.0 --out DIR [--rid linux-x64]

The version and the metadata come from Soe.csproj; prints the package's path.
"""
import argparse
import os
import re
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


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
</Types>
"""

RELS = """<?xml version="1.0" encoding="utf-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/{id}.nuspec" Id="R0" />
</Relationships>
"""


def main():
    parser = argparse.ArgumentParser()
    for name in ("--dll", "--xml", "--native", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--rid", default="linux-x64")
    args = parser.parse_args()
    with open(os.path.join(HERE, "Soe.csproj")) as f:
        project = f.read()
    spec, fields = nuspec(project)
    native = {"linux": "libsoe.so", "osx": "libsoe.dylib", "win": "soe.dll"}[args.rid.split("-")[0]]
    path = os.path.join(args.out, "%s.%s.nupkg" % (fields["PackageId"], fields["Version"]))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", CONTENT_TYPES)
        z.writestr("_rels/.rels", RELS.format(id=fields["PackageId"]))
        z.writestr("%s.nuspec" % fields["PackageId"], spec)
        z.write(args.dll, "lib/netstandard2.1/Soe.dll")
        z.write(args.xml, "lib/netstandard2.1/Soe.xml")
        z.write(args.native, "runtimes/%s/native/%s" % (args.rid, native))
    print(path)


if __name__ == "__main__":
    main()
