##
## ad_chfs — ROMIO driver for CHFS (chfs-stack). Included from adio/Makefile.mk by
## romio-adio-chfs/romio-ad_chfs.patch; built when configured --with-file-system=...+chfs.
##

if BUILD_AD_CHFS

noinst_HEADERS += adio/ad_chfs/ad_chfs.h

romio_other_sources +=              \
    adio/ad_chfs/ad_chfs.c          \
    adio/ad_chfs/ad_chfs_open.c     \
    adio/ad_chfs/ad_chfs_io.c       \
    adio/ad_chfs/ad_chfs_fcntl.c    \
    adio/ad_chfs/ad_chfs_hints.c    \
    adio/ad_chfs/ad_chfs_error.c

endif BUILD_AD_CHFS
