# Standalone build of the usnic BTL against an installed Open MPI 4.1.x or
# 5.0.x with its development headers (Debian: libopenmpi-dev) and libfabric
# 1.x or 2.x.
#
#   make            build mca_btl_usnic.so and the unit tests
#   make check      run the unit tests (no network needed)
#   make install    install into Open MPI's component directory (root)
#   make install-user  install into $HOME/.openmpi/components
#
# Which Open MPI: the one whose ompi_info is on PATH, or the one installed
# under OMPI=/prefix (make OMPI=/opt/openmpi-5.0.10; then objects, plugin
# and unit tests go under build/ompi-<version>/ so both series can be built
# side by side).  Its paths come from `ompi_info --path all`; any of
# OMPI_INC, OMPI_LIB, OMPI_PKGLIBDIR, OMPI_DATADIR can still be given.

OMPI ?=
OMPI_INFO ?= $(if $(OMPI),$(OMPI)/bin/ompi_info,ompi_info)
OMPI_PATHS := $(shell $(OMPI_INFO) --path all --parsable 2>/dev/null)
ompi_path = $(firstword $(patsubst path:$(1):%,%,$(filter path:$(1):%,$(OMPI_PATHS))))
OMPI_INC   ?= $(or $(call ompi_path,pkgincludedir),/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi)
# PMIx's headers (pmix.h), needed by Open MPI 5.0's pmix-internal.h
OMPI_INCDIR ?= $(or $(call ompi_path,incdir),$(dir $(OMPI_INC)))
OMPI_LIB   ?= $(or $(call ompi_path,libdir),/usr/lib/x86_64-linux-gnu/openmpi/lib)
OMPI_PKGLIBDIR ?= $(or $(call ompi_path,pkglibdir),$(OMPI_LIB)/openmpi3)
OMPI_DATADIR ?= $(or $(call ompi_path,pkgdatadir),/usr/share/openmpi)
OMPI_VERSION := $(shell sed -n 's/^\#define OPAL_\(MAJOR\|MINOR\)_VERSION \([0-9]*\).*/\2/p' $(OMPI_INC)/opal_config.h 2>/dev/null | paste -sd.)
USER_COMPONENT_DIR ?= $(HOME)/.openmpi/components

CC       ?= gcc
WARN     = -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
# -mcx16: Open MPI's lock-free lists use 128-bit compare-and-swap
CFLAGS   += $(WARN) -fPIC -std=gnu11 -fvisibility=hidden -mcx16
CPPFLAGS += -I$(OMPI_INC) -I$(OMPI_INCDIR) -I. -DOPAL_BTL_USNIC_STANDALONE=1 $(shell pkg-config --cflags libfabric 2>/dev/null)
# test builds only (test/provider: a plugin that breaks the provider contract)
CPPFLAGS += $(CPPFLAGS_EXTRA)
# libfabric: headers only; the ofi wire loads the library when first
# asked for devices (btl_usnic_ofi_lib.h), so it is not linked
# the runpath lets the unit tests find a libopen-pal outside the linker's path
LDFLAGS_PAL = -L$(OMPI_LIB) -Wl,-rpath,$(OMPI_LIB) -lopen-pal
# btl_usnic_hwloc.c calls hwloc directly (Debian's Open MPI uses the
# external libhwloc; libhwloc-dev)
LDLIBS_HWLOC = $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
# datagram tags and key derivation (btl_usnic_auth.c; libsodium-dev)
LDLIBS_SODIUM = $(shell pkg-config --libs libsodium 2>/dev/null || echo -lsodium)
# large datagrams' tags (btl_usnic_auth.c), optional: OpenSSL's libcrypto
# (libssl-dev) where pkg-config finds it
HAVE_LIBCRYPTO := $(shell pkg-config --exists libcrypto 2>/dev/null && echo 1 || echo 0)
LDLIBS_CRYPTO = $(if $(filter 1,$(HAVE_LIBCRYPTO)),$(shell pkg-config --libs libcrypto))
CPPFLAGS += -DOPAL_BTL_USNIC_HAVE_LIBCRYPTO=$(HAVE_LIBCRYPTO) $(if $(filter 1,$(HAVE_LIBCRYPTO)),$(shell pkg-config --cflags libcrypto))

ENGINE_SRCS = btl_usnic_auth.c btl_usnic_ghash.c btl_usnic_connectivity.c btl_usnic_batch.c btl_usnic_slab.c btl_usnic_frag.c btl_usnic_engine_core.c btl_usnic_cc.c btl_usnic_share.c btl_usnic_pmtu.c btl_usnic_pieces.c btl_usnic_endpoint.c btl_usnic_complete.c btl_usnic_acktr.c btl_usnic_ack.c btl_usnic_post.c btl_usnic_put.c btl_usnic_probe.c btl_usnic_send.c btl_usnic_recv.c btl_usnic_reg.c btl_usnic_glue.c
COMPONENT_SRCS = $(ENGINE_SRCS) btl_usnic_globals.c btl_usnic_pml.c btl_usnic_away.c btl_usnic_help.c btl_usnic_component.c btl_usnic_module.c btl_usnic_btl.c btl_usnic_peers.c btl_usnic_wire_ofi.c btl_usnic_ofi_lib.c btl_usnic_wire_sock.c btl_usnic_inject.c btl_usnic_mca.c btl_usnic_if.c btl_usnic_kcharge.c btl_usnic_ext.c btl_usnic_hwloc.c btl_usnic_cagent.c btl_usnic_cclient.c
HEADERS = $(wildcard *.h)

BUILD ?= $(if $(OMPI),build/ompi-$(OMPI_VERSION),build)
SO ?= $(if $(OMPI),$(BUILD)/mca_btl_usnic.so,mca_btl_usnic.so)
OBJS = $(COMPONENT_SRCS:%.c=$(BUILD)/%.o)

all: $(SO) unit-tests

check-ompi:
	@test -f $(OMPI_INC)/opal_config.h || { echo "no Open MPI development headers at $(OMPI_INC) (install libopenmpi-dev, or name an installation with make OMPI=/prefix)" >&2; exit 1; }

$(OBJS): | check-ompi

$(BUILD)/%.o: %.c $(HEADERS) Makefile
	@mkdir -p $(BUILD)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(SO): $(OBJS)
	$(CC) -shared -o $@ $(OBJS) $(LDFLAGS_PAL) -ldl $(LDLIBS_HWLOC) $(LDLIBS_SODIUM) $(LDLIBS_CRYPTO)

include test/unit/Makefile.inc

install: $(SO)
	install -d $(DESTDIR)$(OMPI_PKGLIBDIR) $(DESTDIR)$(OMPI_DATADIR)
	install -m 0755 $(SO) $(DESTDIR)$(OMPI_PKGLIBDIR)/mca_btl_usnic.so
	install -m 0644 help-mpi-btl-usnic.txt $(DESTDIR)$(OMPI_DATADIR)/help-mpi-btl-usnic.txt

install-user: $(SO)
	install -d $(USER_COMPONENT_DIR)
	install -m 0755 $(SO) $(USER_COMPONENT_DIR)/mca_btl_usnic.so
	install -m 0644 help-mpi-btl-usnic.txt $(USER_COMPONENT_DIR)/help-mpi-btl-usnic.txt

uninstall:
	rm -f $(DESTDIR)$(OMPI_PKGLIBDIR)/mca_btl_usnic.so $(DESTDIR)$(OMPI_DATADIR)/help-mpi-btl-usnic.txt

clean:
	rm -rf $(BUILD) $(SO)

.PHONY: all check-ompi install install-user uninstall clean check unit-tests
