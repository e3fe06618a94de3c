/*
 * _dl_find_object for static musl programs built by `cargo xtask cross --target linux-musl`.
 *
 * The standard library built from source (-Zbuild-std) links its unwinder by the name
 * `unwind`; there we give it GCC's (libgcc_eh.a of the build machine's GCC, copied into
 * target/cross/tools/musl/libunwind.a with this file's object by xtask's cross_tools.rs,
 * musl_libunwind). That copy was built against glibc 2.35 or later, and it finds the unwind
 * table of a code address with glibc's _dl_find_object, which musl does not have. This does
 * the same with dl_iterate_phdr, which musl has: it reports the loaded object whose PT_LOAD
 * segment holds the address, and that object's PT_GNU_EH_FRAME (the only field GCC's
 * unwinder reads).
 *
 * The struct is glibc's <dlfcn.h> layout for x86-64 (no dlfo_eh_dbase, no dlfo_eh_count).
 */
#define _GNU_SOURCE
#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct dl_find_object {
    unsigned long long dlfo_flags;
    void *dlfo_map_start;
    void *dlfo_map_end;
    struct link_map *dlfo_link_map;
    void *dlfo_eh_frame;
    unsigned long long dlfo_reserved[7];
};

struct search {
    uintptr_t pc;
    struct dl_find_object *result;
    int found;
};

/* One loaded object: whether one of its PT_LOAD segments holds the address. */
static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    struct search *s = data;
    uintptr_t start = 0, end = 0, eh_frame = 0;
    int inside = 0;
    (void)size;
    for (size_t i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && s->pc >= lo && s->pc < lo + p->p_memsz) {
            inside = 1;
            start = lo;
            end = lo + p->p_memsz;
        } else if (p->p_type == PT_GNU_EH_FRAME) {
            eh_frame = lo;
        }
    }
    if (!inside)
        return 0;
    s->result->dlfo_flags = 0;
    s->result->dlfo_map_start = (void *)start;
    s->result->dlfo_map_end = (void *)end;
    s->result->dlfo_link_map = NULL;
    s->result->dlfo_eh_frame = (void *)eh_frame;
    s->found = 1;
    return 1;
}

/* 0 and *result filled when a loaded object holds pc; -1 otherwise (as glibc's). */
int _dl_find_object(void *pc, struct dl_find_object *result)
{
    struct search s = { (uintptr_t)pc, result, 0 };
    dl_iterate_phdr(visit, &s);
    return s.found ? 0 : -1;
}
