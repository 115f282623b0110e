# -*- shell-script -*-
#
# Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
#
# Configure glue for building the usnic BTL inside an Open MPI 4.1.x or
# 5.0.x source tree as opal/mca/btl/usnic (it replaces upstream's usnic BTL
# there).  scripts/intree-build.sh proves both series.
#
# libfabric's headers are required (found by Open MPI's OPAL_CHECK_OFI, so
# --with-ofi applies; the library itself is loaded at run time, and only
# when the ofi wire is chosen), and so is libsodium (the datagrams' tags
# and key derivation; Debian: libsodium-dev).  OpenSSL's libcrypto (Debian:
# libssl-dev) is optional: it tags large datagrams faster.  The Cisco usnic extension header
# rdma/fi_ext_usnic.h is optional: without it the component runs on any
# FI_EP_DGRAM provider (libfabric's portable "udp" provider).
#
# What differs between the series' configure macros, and how this file
# copes (both trees' config/opal_check_ofi.m4 were read for this):
#  - OPAL_CHECK_OFI: 4.1 takes no argument and leaves the flags in
#    opal_ofi_{CPPFLAGS,LDFLAGS,LIBS} (and AC_SUBSTs them); 5.0 needs a
#    prefix argument, sets <prefix>_{CPPFLAGS,LDFLAGS,LIBS} (through
#    OAC_CHECK_PACKAGE, which always sets them, if only to empty) and
#    substitutes nothing.  We call OPAL_CHECK_OFI([btl_usnic_ofi]) (4.1
#    ignores the argument) and take the flags from btl_usnic_ofi_* when
#    they are set, else from opal_ofi_*.  Both series leave opal_ofi_happy.
#  - The component's own flags are btl_usnic_{CPPFLAGS,LDFLAGS,LIBS}
#    (libfabric's include path; libsodium, libdl), substituted for Makefile.am; both series'
#    MCA_PROCESS_COMPONENT also hand btl_usnic_{LDFLAGS,LIBS} to the
#    wrapper compilers when the component is built static.
#  - libopen-pal's libtool library: 4.1 substitutes OPAL_LIB_PREFIX
#    (lib@OPAL_LIB_PREFIX@open-pal.la), 5.0 OPAL_LIB_NAME
#    (lib@OPAL_LIB_NAME@.la); each leaves the other's unsubstituted, so
#    this file substitutes btl_usnic_libopen_pal for Makefile.am.
#
# --with-usnic      fail configure if the usnic BTL cannot be built
# --without-usnic   do not build the usnic BTL
#
# configure prints one summary line, e.g.
#   checking for usnic BTL... yes (libfabric 1.17, usnic extension: no, libcrypto: yes)
#   checking for usnic BTL... no (libfabric not found; see --with-ofi)

# MCA_opal_btl_usnic_CONFIG([action-if-can-compile],
#                           [action-if-cant-compile])
# ------------------------------------------------
AC_DEFUN([MCA_opal_btl_usnic_CONFIG],[
    AC_CONFIG_FILES([opal/mca/btl/usnic/Makefile])
    OPAL_VAR_SCOPE_PUSH([btl_usnic_happy btl_usnic_why btl_usnic_ext btl_usnic_crypto btl_usnic_fi_major btl_usnic_fi_minor btl_usnic_save_CPPFLAGS])
    btl_usnic_CPPFLAGS=
    btl_usnic_LDFLAGS=
    btl_usnic_LIBS=

    AC_ARG_WITH([usnic],
                [AS_HELP_STRING([--with-usnic],
                                [Build the usnic BTL (reliable MPI over libfabric datagrams); fail if it cannot be built.  --without-usnic skips it.  Needs libfabric (see --with-ofi).])])

    btl_usnic_happy=yes
    btl_usnic_why=
    btl_usnic_ext=no
    btl_usnic_fi_major=
    btl_usnic_fi_minor=

    AS_IF([test "$with_usnic" = "no"],
          [btl_usnic_happy=no
           btl_usnic_why="disabled by --without-usnic"])

    # Interface discovery reads sysfs and getifaddrs(): Linux only.
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AS_CASE([$host_os],
                   [*linux*], [],
                   [btl_usnic_happy=no
                    btl_usnic_why="Linux only; host is $host_os"])])

    # 5.0 sets btl_usnic_ofi_{CPPFLAGS,LDFLAGS,LIBS}; 4.1 ignores the
    # argument and sets opal_ofi_* instead (see the top of this file).
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AS_UNSET([btl_usnic_ofi_CPPFLAGS])
           AS_UNSET([btl_usnic_ofi_LDFLAGS])
           AS_UNSET([btl_usnic_ofi_LIBS])
           OPAL_CHECK_OFI([btl_usnic_ofi])
           AS_IF([test "$opal_ofi_happy" != "yes"],
                 [btl_usnic_happy=no
                  AS_IF([test "$with_ofi" = "no"],
                        [btl_usnic_why="libfabric disabled by --without-ofi"],
                        [btl_usnic_why="libfabric not found; install its development files (Debian: libfabric-dev) or see --with-ofi"])],
                 [AS_IF([test "${btl_usnic_ofi_CPPFLAGS+set}" = "set"],
                        [btl_usnic_CPPFLAGS=$btl_usnic_ofi_CPPFLAGS],
                        [btl_usnic_CPPFLAGS=$opal_ofi_CPPFLAGS])])])
    # libfabric's headers only: the ofi wire loads the library when it is
    # first asked for devices (btl_usnic_ofi_lib.h), so jobs on the socket
    # wire never pay its load; dlopen is in libdl on older C libraries.
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_SEARCH_LIBS([dlopen], [dl],
                          [AS_IF([test "$ac_cv_search_dlopen" != "none required"],
                                 [btl_usnic_LIBS="$btl_usnic_LIBS $ac_cv_search_dlopen"])])])

    # FI_VERSION(1,5): FI_CONTEXT2, fabric names in CIDR form.
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [OPAL_CHECK_OFI_VERSION_GE([1,5], [],
                                     [btl_usnic_happy=no
                                      btl_usnic_why="libfabric older than 1.5"])])

    AS_IF([test "$btl_usnic_happy" = "yes"],
          [btl_usnic_save_CPPFLAGS=$CPPFLAGS
           CPPFLAGS="$btl_usnic_CPPFLAGS $CPPFLAGS"
           AC_COMPUTE_INT([btl_usnic_fi_major], [FI_MAJOR_VERSION],
                          [#include <rdma/fabric.h>], [btl_usnic_fi_major=?])
           AC_COMPUTE_INT([btl_usnic_fi_minor], [FI_MINOR_VERSION],
                          [#include <rdma/fabric.h>], [btl_usnic_fi_minor=?])
           # Optional: only present where libfabric was built with the
           # Cisco usnic provider.
           AC_CHECK_HEADER([rdma/fi_ext_usnic.h], [btl_usnic_ext=yes], [btl_usnic_ext=no],
                           [#include <rdma/fabric.h>])
           CPPFLAGS=$btl_usnic_save_CPPFLAGS])

    # Every datagram's tag and the key derivation (btl_usnic_auth.c)
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_CHECK_HEADER([sodium.h],
                           [AC_CHECK_LIB([sodium], [sodium_init], [btl_usnic_LIBS="$btl_usnic_LIBS -lsodium"],
                                         [btl_usnic_happy=no
                                          btl_usnic_why="libsodium not found; install its development files (Debian: libsodium-dev)"])],
                           [btl_usnic_happy=no
                            btl_usnic_why="sodium.h not found; install libsodium's development files (Debian: libsodium-dev)"])])

    # Optional: OpenSSL's libcrypto tags large datagrams (twice libsodium's
    # AES-GCM speed there) and takes a gathered payload without a copy
    # (btl_usnic_auth.c); without it libsodium tags every datagram.
    btl_usnic_crypto=no
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_CHECK_HEADER([openssl/evp.h],
                           [AC_CHECK_LIB([crypto], [EVP_EncryptInit_ex],
                                         [btl_usnic_crypto=yes
                                          btl_usnic_LIBS="$btl_usnic_LIBS -lcrypto"])])])
    AS_IF([test "$btl_usnic_crypto" = "yes"],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_LIBCRYPTO], [1],
                     [Define to 1 if the usnic BTL tags large datagrams with OpenSSL's libcrypto, 0 if not])],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_LIBCRYPTO], [0],
                     [Define to 1 if the usnic BTL tags large datagrams with OpenSSL's libcrypto, 0 if not])])

    # Makefile.am links the DSO against the tree's libopen-pal.
    AS_IF([test -n "$OPAL_LIB_NAME"],
          [btl_usnic_libopen_pal="lib${OPAL_LIB_NAME}.la"],
          [btl_usnic_libopen_pal="lib${OPAL_LIB_PREFIX}open-pal.la"])

    AS_IF([test "$btl_usnic_happy" != "yes"],
          [btl_usnic_CPPFLAGS=
           btl_usnic_LDFLAGS=
           btl_usnic_LIBS=])
    AC_SUBST([btl_usnic_CPPFLAGS])
    AC_SUBST([btl_usnic_LDFLAGS])
    AC_SUBST([btl_usnic_LIBS])
    AC_SUBST([btl_usnic_libopen_pal])

    AS_IF([test "$btl_usnic_ext" = "yes"],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC], [1],
                     [Define to 1 if the usnic BTL can use libfabric's Cisco usnic extension header rdma/fi_ext_usnic.h, 0 if not])],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC], [0],
                     [Define to 1 if the usnic BTL can use libfabric's Cisco usnic extension header rdma/fi_ext_usnic.h, 0 if not])])

    AC_MSG_CHECKING([for usnic BTL])
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_MSG_RESULT([yes (libfabric $btl_usnic_fi_major.$btl_usnic_fi_minor, usnic extension: $btl_usnic_ext, libcrypto: $btl_usnic_crypto)])],
          [AC_MSG_RESULT([no ($btl_usnic_why)])])

    OPAL_SUMMARY_ADD([[Transports]], [[usnic BTL (libfabric datagrams)]], [], [$btl_usnic_happy])

    AS_IF([test "$btl_usnic_happy" = "yes"],
          [$1],
          [AS_IF([test "$with_usnic" = "yes"],
                 [AC_MSG_WARN([--with-usnic was given, but the usnic BTL cannot be built: $btl_usnic_why])
                  AC_MSG_ERROR([Cannot continue])])
           $2])

    OPAL_VAR_SCOPE_POP
])dnl
