# -*- shell-script -*-
#
# Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
#
# Configure glue for building the usnic BTL inside an Open MPI source tree
# as opal/mca/btl/usnic.  libfabric is required; the Cisco usnic extension
# header (rdma/fi_ext_usnic.h) is optional: without it the component runs
# on any FI_EP_DGRAM provider (libfabric's portable "udp" provider).
#
# MCA_opal_btl_usnic_CONFIG([action-if-can-compile],
#                           [action-if-cant-compile])
# ------------------------------------------------
AC_DEFUN([MCA_opal_btl_usnic_CONFIG],[
    AC_CONFIG_FILES([opal/mca/btl/usnic/Makefile])
    OPAL_VAR_SCOPE_PUSH([btl_usnic_happy btl_usnic_ext btl_usnic_save_CPPFLAGS])

    btl_usnic_happy=yes
    btl_usnic_ext=no

    # The component talks to the kernel's IPv4 stack (sysfs, getifaddrs):
    # Linux only.
    AS_CASE([$host_os],
            [linux*], [],
            [AC_MSG_CHECKING([whether the usnic BTL supports $host_os])
             AC_MSG_RESULT([no (Linux only)])
             btl_usnic_happy=no])

    AS_IF([test "$btl_usnic_happy" = "yes"],
          [OPAL_CHECK_OFI
           AS_IF([test "$opal_ofi_happy" != "yes"], [btl_usnic_happy=no])])

    # FI_VERSION(1,5): fabric names in CIDR form, FI_CONTEXT2
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [OPAL_CHECK_OFI_VERSION_GE([1,5], [], [btl_usnic_happy=no])])

    AS_IF([test "$btl_usnic_happy" = "yes"],
          [btl_usnic_save_CPPFLAGS=$CPPFLAGS
           CPPFLAGS="$CPPFLAGS $opal_ofi_CPPFLAGS"
           AC_CHECK_HEADER([rdma/fi_ext_usnic.h], [btl_usnic_ext=yes], [btl_usnic_ext=no])
           CPPFLAGS=$btl_usnic_save_CPPFLAGS])

    AS_IF([test "$btl_usnic_ext" = "yes"],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC], [1],
                     [Whether the Cisco usnic libfabric extension header is available])],
          [AC_DEFINE([OPAL_BTL_USNIC_HAVE_FI_EXT_USNIC], [0],
                     [Whether the Cisco usnic libfabric extension header is available])])

    AC_MSG_CHECKING([whether to build the usnic BTL])
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_MSG_RESULT([yes (usnic extension header: $btl_usnic_ext)])
           $1],
          [AC_MSG_RESULT([no])
           $2])

    OPAL_SUMMARY_ADD([[Transports]], [[usnic BTL over libfabric datagrams (udp/usnic)]], [],
                     [$btl_usnic_happy])
    OPAL_VAR_SCOPE_POP
])dnl
