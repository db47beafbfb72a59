/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* Keeping the strings that probes pass in mapped memory.
 *
 * A tracer reads a probe's string arguments from inside the kernel,
 * at the moment the probe fires, where a page fault cannot be served.
 * A string literal lives in a file-backed page of the executable or of
 * a plugin: if this process has never touched that page (or fork left
 * it out of the child's page tables, as fork does for file mappings),
 * the tracer reads "" instead of "debug" or "nbdkit".  So the segments
 * holding constant data are mapped up front, in the process that
 * serves: the executable's, and each plugin's and filter's.  Code
 * pages are left alone: no probe argument points into them.
 */

#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

/* Map [START, END), whole pages of PAGE bytes. */
static void
populate (uintptr_t start, uintptr_t end, uintptr_t page)
{
  if (madvise ((void *) start, end - start, MADV_POPULATE_READ) == 0 ||
      errno != EINVAL)
    return;
  /* A kernel older than 5.14: touch each page instead. */
  for (uintptr_t a = start; a < end; a += page)
    (void) *(volatile const char *) a;
}

static int
populate_if_holds (struct dl_phdr_info *info, size_t size, void *addr)
{
  (void) size;
  uintptr_t want = (uintptr_t) addr;
  bool holds = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !holds; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    holds = ph->p_type == PT_LOAD && lo <= want && want < lo + ph->p_memsz;
  }
  if (!holds)
    return 0;

  uintptr_t page = (uintptr_t) sysconf (_SC_PAGESIZE);
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || (ph->p_flags & PF_X) || ph->p_filesz == 0)
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    populate (ROUND_DOWN (lo, page), ROUND_UP (lo + ph->p_filesz, page),
              page);
  }
  return 1;                     /* found: stop the walk */
}

/* Map the constant data of the object (executable or .so) that holds
 * ADDR.
 */
void
resident_object (const void *addr)
{
  dl_iterate_phdr (populate_if_holds, (void *) addr);
}

/* The executable's and every loaded layer's. */
void
resident_all (const struct layer *top)
{
  resident_object ((const void *) resident_all);
  for (const struct layer *l = top; l; l = l->next) {
    void *sym = dlsym (l->dl, strcmp (l->type, "filter") == 0
                                ? "filter_init" : "plugin_init");
    if (sym)
      resident_object (sym);
  }
}
