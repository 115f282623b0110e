# Standalone build of the usnic BTL against the installed Open MPI 4.1.x
# development headers (Debian: libopenmpi-dev) and libfabric.
#
#   make            build mca_btl_usnic.so and the unit tests
#   make check      run the unit tests (no network needed)
#   make install    install into Open MPI's component directory (root)
#   make install-user  install into $HOME/.openmpi/components

OMPI_INC   ?= /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi
OMPI_LIB   ?= /usr/lib/x86_64-linux-gnu/openmpi/lib
OMPI_PKGLIBDIR ?= $(OMPI_LIB)/openmpi3
OMPI_DATADIR ?= /usr/share/openmpi
USER_COMPONENT_DIR ?= $(HOME)/.openmpi/components

CC       ?= gcc
WARN     = -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
# -mcx16: Open MPI's lock-free lists use 128-bit compare-and-swap
CFLAGS   += $(WARN) -fPIC -std=gnu11 -fvisibility=hidden -mcx16
CPPFLAGS += -I$(OMPI_INC) -I. -DOPAL_BTL_USNIC_STANDALONE=1 $(shell pkg-config --cflags libfabric 2>/dev/null)
LDLIBS_FABRIC = $(shell pkg-config --libs libfabric 2>/dev/null || echo -lfabric)
LDFLAGS_PAL = -L/usr/lib/x86_64-linux-gnu -lopen-pal
# btl_usnic_hwloc.c calls hwloc directly (Debian's Open MPI uses the
# external libhwloc; libhwloc-dev)
LDLIBS_HWLOC = $(shell pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)
# datagram tags and key derivation (btl_usnic_auth.c; libsodium-dev)
LDLIBS_SODIUM = $(shell pkg-config --libs libsodium 2>/dev/null || echo -lsodium)

ENGINE_SRCS = btl_usnic_auth.c btl_usnic_connectivity.c btl_usnic_frag.c btl_usnic_endpoint.c btl_usnic_ack.c btl_usnic_send.c btl_usnic_recv.c btl_usnic_put.c
COMPONENT_SRCS = $(ENGINE_SRCS) btl_usnic_pml.c btl_usnic_away.c btl_usnic_component.c btl_usnic_module.c btl_usnic_mca.c btl_usnic_if.c btl_usnic_hwloc.c btl_usnic_cagent.c btl_usnic_cclient.c
HEADERS = $(wildcard *.h)

BUILD ?= build
OBJS = $(COMPONENT_SRCS:%.c=$(BUILD)/%.o)

all: mca_btl_usnic.so unit-tests

$(BUILD)/%.o: %.c $(HEADERS) Makefile
	@mkdir -p $(BUILD)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

mca_btl_usnic.so: $(OBJS)
	$(CC) -shared -o $@ $(OBJS) $(LDFLAGS_PAL) $(LDLIBS_FABRIC) $(LDLIBS_HWLOC) $(LDLIBS_SODIUM)

include test/unit/Makefile.inc

install: mca_btl_usnic.so
	install -d $(DESTDIR)$(OMPI_PKGLIBDIR) $(DESTDIR)$(OMPI_DATADIR)
	install -m 0755 mca_btl_usnic.so $(DESTDIR)$(OMPI_PKGLIBDIR)/mca_btl_usnic.so
	install -m 0644 help-mpi-btl-usnic.txt $(DESTDIR)$(OMPI_DATADIR)/help-mpi-btl-usnic.txt

install-user: mca_btl_usnic.so
	install -d $(USER_COMPONENT_DIR)
	install -m 0755 mca_btl_usnic.so $(USER_COMPONENT_DIR)/mca_btl_usnic.so
	install -m 0644 help-mpi-btl-usnic.txt $(USER_COMPONENT_DIR)/help-mpi-btl-usnic.txt

uninstall:
	rm -f $(DESTDIR)$(OMPI_PKGLIBDIR)/mca_btl_usnic.so $(DESTDIR)$(OMPI_DATADIR)/help-mpi-btl-usnic.txt

clean:
	rm -rf $(BUILD) mca_btl_usnic.so

.PHONY: all install install-user uninstall clean check unit-tests
