# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fuzzing/fuzz.mk: builds the libFuzzer targets.  Not part of the
# automake build: the top-level "make fuzz" runs it in the build tree's
# fuzzing/ directory as
#
#   make -f $(top_srcdir)/fuzzing/fuzz.mk top_srcdir=... top_builddir=... \
#        FUZZ_CC=clang PROBES_O=<server/probes.o, if probes are enabled> \
#        SERVER_CFLAGS=<$(GNUTLS_CFLAGS)> SERVER_LIBS=<$(GNUTLS_LIBS)>
#
# Sources come from $(top_srcdir); config.h, include/nbdkit-version.h,
# server/probes.h and server/probes.o from $(top_builddir).  Every
# server source (server/*.c) is compiled again with the fuzzer's
# instrumentation (main.c with main renamed, so the harness can link
# it), and so is the memory plugin (plugins/memory/*.c, with the page
# stores of common/allocators), as the .so the
# harness loads by path.  fuzz-data is apart: the data plugin's
# expression parser (plugins/data/format-*.c) linked with its target
# alone, no server.  V=1 shows the commands.

FUZZ_CC = clang
FUZZ_CFLAGS = -g -O1 -fno-omit-frame-pointer
FUZZ_SANITIZERS = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_WARN = -Wall -Wextra -Wno-unused-parameter -Werror
PROBES_O =
SERVER_CFLAGS =
SERVER_LIBS =
PLUGIN_CFLAGS =
PLUGIN_LIBS =

srv = $(top_srcdir)/server
fz = $(top_srcdir)/fuzzing
mem = $(top_srcdir)/plugins/memory
alloc = $(top_srcdir)/common/allocators
datap = $(top_srcdir)/plugins/data

ifeq ($(V),1)
Q =
say = @:
else
Q = @
say = @echo
endif

CPPFLAGS_ALL = -DHAVE_CONFIG_H -I$(top_builddir) \
	-I$(top_srcdir)/include -I$(top_builddir)/include \
	-I$(top_srcdir)/common
SERVER_CPPFLAGS = $(CPPFLAGS_ALL) -I$(top_builddir)/server -I$(srv) \
	-DPLUGINDIR='"/nonexistent"' -DFILTERDIR='"/nonexistent"' \
	-DSBINDIR='"/nonexistent"' -DBINDIR='"/nonexistent"' \
	-DMANDIR='"/nonexistent"' -DLIBDIR='"/nonexistent"' \
	-DSYSCONFDIR='"/nonexistent"' $(SERVER_CFLAGS)
COMPILE = $(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZERS) \
	-fsanitize=fuzzer-no-link $(FUZZ_WARN) -pthread -MMD -MP

SERVER_OBJS = $(patsubst $(srv)/%.c,server-%.o,\
	$(filter-out $(srv)/test-%.c,$(wildcard $(srv)/*.c)))
PLUGIN_OBJS = $(patsubst $(mem)/%.c,plugin-%.o,$(wildcard $(mem)/*.c)) \
	$(patsubst $(alloc)/%.c,alloc-%.o,\
	  $(filter-out $(alloc)/test-%.c,$(wildcard $(alloc)/*.c)))
HARNESS_OBJS = fuzz-harness.o reply-checker.o

TARGETS = fuzz-connection fuzz-transmission fuzz-data
PLUGIN = nbdkit-memory-plugin-fuzz.so

all: $(TARGETS) $(PLUGIN)

# Plugins resolve the nbdkit_* helpers against the executable.
LINK = $(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZERS) -fsanitize=fuzzer \
	-pthread -Wl,--dynamic-list=$(srv)/nbdkit.syms

fuzz-connection: fuzz-connection.o $(HARNESS_OBJS) $(SERVER_OBJS) $(PROBES_O)
	$(say) "  LINK    $@"
	$(Q)$(LINK) -o $@ $^ $(SERVER_LIBS) -ldl
fuzz-transmission: fuzz-transmission.o $(HARNESS_OBJS) $(SERVER_OBJS) \
		$(PROBES_O)
	$(say) "  LINK    $@"
	$(Q)$(LINK) -o $@ $^ $(SERVER_LIBS) -ldl

DATA_CPPFLAGS = $(CPPFLAGS_ALL) -I$(top_srcdir)/common/include \
	-I$(top_srcdir)/common/utils -I$(datap)
# The parser starts <(SCRIPT) children through common/utils/subprocess.c.
fuzz-data: fuzz-data.o data-format-parse.o data-format-render.o \
		utils-subprocess.o
	$(say) "  LINK    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZERS) -fsanitize=fuzzer \
	  -o $@ $^
fuzz-data.o: $(fz)/fuzz-data.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(DATA_CPPFLAGS) -c -o $@ $<
data-%.o: $(datap)/%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(DATA_CPPFLAGS) -c -o $@ $<
utils-%.o: $(top_srcdir)/common/utils/%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(DATA_CPPFLAGS) -c -o $@ $<

server-main.o: $(srv)/main.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(SERVER_CPPFLAGS) -Dmain=nbdkit_server_main -c -o $@ $<
server-%.o: $(srv)/%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(SERVER_CPPFLAGS) -c -o $@ $<
fuzz-%.o: $(fz)/fuzz-%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(SERVER_CPPFLAGS) -I$(fz) -c -o $@ $<
reply-checker.o: $(fz)/reply-checker.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(CPPFLAGS_ALL) -I$(fz) -c -o $@ $<

plugin-%.o: $(mem)/%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(CPPFLAGS_ALL) -I$(mem) -I$(alloc) \
	  -I$(top_srcdir)/common/pluginkit -fPIC -c -o $@ $<
alloc-%.o: $(alloc)/%.c
	$(say) "  CC      $@"
	$(Q)$(COMPILE) $(CPPFLAGS_ALL) -I$(top_srcdir)/common/include \
	  -I$(top_srcdir)/common/utils $(PLUGIN_CFLAGS) -fPIC -c -o $@ $<
$(PLUGIN): $(PLUGIN_OBJS)
	$(say) "  LINK    $@"
	$(Q)$(FUZZ_CC) $(FUZZ_SANITIZERS) -shared -o $@ $^ $(PLUGIN_LIBS)

clean:
	rm -f $(TARGETS) $(PLUGIN) *.o *.d

.PHONY: all clean

-include $(wildcard *.d)
