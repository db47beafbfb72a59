/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* nbdkit: USDT probes for plugin and filter authors.
 *
 * NBDKIT_PROBE (name, args...) places a static probe under the provider
 * "nbdkit" in the calling .so, visible to perf, bpftrace, SystemTap and
 * DTrace.  Without <sys/sdt.h> at build time, the macros compile to
 * nothing and their arguments are not evaluated.
 *
 *   NBDKIT_PROBE (myplugin_cache_hit, nbdkit_connection_id (),
 *                 nbdkit_request_cookie (), offset, count);
 *
 * Passing the connection id and the request's cookie first, as the
 * server's own probes do, lets a tracer join a plugin's probes to the
 * server's request_start and request_done.
 *
 * A plugin may name its own provider, so that its probes are
 * usdt:SO:myplugin:NAME rather than usdt:SO:nbdkit:NAME: define
 * NBDKIT_PROBE_PROVIDER to an identifier (not a string) before
 * including this header:
 *
 *   #define NBDKIT_PROBE_PROVIDER myplugin
 *   #include <nbdkit-probe.h>
 *
 * Use one provider per file (the semaphores below take its name).
 *
 * Arguments should be integers or C strings, at most 12 of them.
 * Arguments are passed in registers or as constants, never as memory
 * operands: in a shared object the compiler would describe a global
 * variable by its address relative to %rip (8@name(%rip)), which
 * tracers read wrongly from a .so.
 *
 * A probe whose arguments are costly to compute can be guarded by a
 * semaphore that the kernel raises while a tracer is attached.  Define
 * NBDKIT_PROBE_SEMAPHORES before including this header, then define one
 * semaphore per probe used in that file (all of them: the probe notes
 * refer to them) at file scope, and test it:
 *
 *   #define NBDKIT_PROBE_SEMAPHORES
 *   #include <nbdkit-probe.h>
 *   NBDKIT_PROBE_SEMAPHORE (myplugin_lookup);
 *   ...
 *   if (NBDKIT_PROBE_ENABLED (myplugin_lookup))
 *     NBDKIT_PROBE (myplugin_lookup, expensive_description (x));
 */
#ifndef NBDKIT_PROBE_H
#define NBDKIT_PROBE_H

#ifndef NBDKIT_PROBE_PROVIDER
#define NBDKIT_PROBE_PROVIDER nbdkit
#endif

#if defined (NBDKIT_PROBES_DISABLE)
#define NBDKIT_HAVE_PROBES 0
#elif defined (__has_include)
#if __has_include (<sys/sdt.h>)
#define NBDKIT_HAVE_PROBES 1
#else
#define NBDKIT_HAVE_PROBES 0
#endif
#else
#define NBDKIT_HAVE_PROBES 0
#endif

#if NBDKIT_HAVE_PROBES
#ifndef STAP_SDT_ARG_CONSTRAINT
#define STAP_SDT_ARG_CONSTRAINT nr   /* registers or constants */
#endif
#ifndef SDT_USE_VARIADIC
#define SDT_USE_VARIADIC 1   /* for STAP_PROBEV */
#endif
#if defined (NBDKIT_PROBE_SEMAPHORES) && !defined (_SDT_HAS_SEMAPHORES)
#define _SDT_HAS_SEMAPHORES 1
#endif
#include <sys/sdt.h>
/* The provider is passed on unexpanded here and expanded by
 * STAP_PROBEV's own arguments, so it may be a macro.
 */
#define NBDKIT_PROBE(...) STAP_PROBEV (NBDKIT_PROBE_PROVIDER, __VA_ARGS__)
/* <sys/sdt.h> names a probe's semaphore PROVIDER_NAME_semaphore. */
#define NBDKIT_PROBE_SEM_NAME_(provider, name) \
  provider##_##name##_semaphore
#define NBDKIT_PROBE_SEM_(provider, name) \
  NBDKIT_PROBE_SEM_NAME_ (provider, name)
/* Hidden, so two plugins' semaphores of the same name never mix. */
#define NBDKIT_PROBE_SEMAPHORE(name)                                    \
  __extension__ unsigned short                                          \
  NBDKIT_PROBE_SEM_ (NBDKIT_PROBE_PROVIDER, name)                       \
  __attribute__ ((unused, section (".probes"), visibility ("hidden")))
#if defined (NBDKIT_PROBE_SEMAPHORES)
/* The kernel changes the semaphore behind the compiler's back. */
#define NBDKIT_PROBE_ENABLED(name)                                      \
  __builtin_expect (*(volatile unsigned short *)                        \
                    &NBDKIT_PROBE_SEM_ (NBDKIT_PROBE_PROVIDER, name)    \
                    != 0, 0)
#else
#define NBDKIT_PROBE_ENABLED(name) (1)
#endif
#else /* !NBDKIT_HAVE_PROBES */
/* The arguments are still "used" (never evaluated), so a variable
 * computed only for a probe does not warn when probes are off.
 */
static inline void
nbdkit_probe_unused_ (int unused __attribute__ ((unused)), ...)
{
}
#define NBDKIT_PROBE(name, ...) \
  do { if (0) nbdkit_probe_unused_ (0, ##__VA_ARGS__); } while (0)
#define NBDKIT_PROBE_SEMAPHORE(name) \
  extern int nbdkit_probe_unused_##name
#define NBDKIT_PROBE_ENABLED(name) (0)
#endif

#endif /* NBDKIT_PROBE_H */
