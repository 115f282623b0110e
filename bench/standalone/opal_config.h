/* Stands in for Open MPI's opal_config.h where bench/mac_speed.c builds
 * btl_usnic_auth.c and btl_usnic_ghash.c without Open MPI: they need nothing of it */
