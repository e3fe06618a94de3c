/* A stand-in for Windows 10's bcryptprimitives.dll, which wine 8 lacks: Rust's standard library
 * on Windows takes its random bytes from ProcessPrng there. This one hands the call to
 * RtlGenRandom (advapi32's SystemFunction036). `cargo xtask wine` builds it with MinGW and puts
 * it beside the Windows executables it runs; real Windows has the real one.
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -ladvapi32
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!SystemFunction036(data, chunk)) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
