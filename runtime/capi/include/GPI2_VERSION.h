/* GPI2_VERSION.h: the version of the GPI-2 interface this library
   implements (GPI-2 1.6.0), as the macros GPI-2 installs under this name.
   gaspi_version() returns the same number at run time. */

#ifndef _GPI2_VERSION_H_
#define _GPI2_VERSION_H_ 1

#define GASPI_MAJOR_VERSION (1)
#define GASPI_MINOR_VERSION (6)
#define GASPI_REVISION (0)

/* 1.6 as a float: major + minor / 10 + revision / 100. */
#define GASPI_VERSION \
  (GASPI_MAJOR_VERSION + GASPI_MINOR_VERSION / 10.0f + GASPI_REVISION / 100.0f)

#endif /* _GPI2_VERSION_H_ */
