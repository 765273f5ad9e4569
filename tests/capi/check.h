/* Checks shared by the C test programs: a failed check prints where and
   why and exits 1, so the Rust test sees the failure and the reason. */
#ifndef CAPI_CHECK_H
#define CAPI_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <GASPI.h>
#include <GASPI_Ext.h>

#define EXPECT_CODE(call, want)                                                \
  do                                                                           \
    {                                                                          \
      gaspi_return_t got_ = (call);                                            \
      if (got_ != (want))                                                      \
        {                                                                      \
          fprintf (stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n",   \
                   __FILE__, __LINE__, #call, got_, gaspi_error_str (got_),    \
                   (int) (want), gaspi_error_str (want));                      \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

#define CHECK(call) EXPECT_CODE (call, GASPI_SUCCESS)

#define ASSERT(cond)                                                           \
  do                                                                           \
    {                                                                          \
      if (!(cond))                                                             \
        {                                                                      \
          fprintf (stderr, "%s:%d: assertion failed: %s\n", __FILE__,         \
                   __LINE__, #cond);                                           \
          exit (1);                                                            \
        }                                                                      \
    }                                                                          \
  while (0)

#endif
