/* nbdkit: USDT probes for plugin and filter authors.
 *
 * NBDKIT_PROBE (name, args...) places a static probe under the provider
 * "nbdkit" in the calling .so, visible to perf, bpftrace, SystemTap and
 * DTrace.  Without <sys/sdt.h> at build time, the macros compile to
 * nothing and their arguments are not evaluated.
 *
 *   NBDKIT_PROBE (myplugin_cache_hit, offset, count);
 *
 * Arguments should be integers or C strings, at most 12 of them.
 */
#ifndef NBDKIT_PROBE_H
#define NBDKIT_PROBE_H

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
#ifndef SDT_USE_VARIADIC
#define SDT_USE_VARIADIC 1   /* for STAP_PROBEV */
#endif
#include <sys/sdt.h>
#define NBDKIT_PROBE(...) STAP_PROBEV (nbdkit, __VA_ARGS__)
#else
#define NBDKIT_PROBE(...) do { } while (0)
#endif

#endif /* NBDKIT_PROBE_H */
