/* The variadic gaspi_printf family, in C because stable Rust cannot define
   a C-variadic function. src/printf.rs exports gaspi_printf and
   gaspi_printf_to as jumps to these, so the arguments arrive untouched. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "GASPI.h"

static void gaspi_capi_vprint (const char *fmt, va_list ap)
{
  char *line = NULL;
  if (fmt == NULL)
    return;
  if (vasprintf (&line, fmt, ap) < 0)
    return;
  fputs (line, stdout);
  fflush (stdout);
  free (line);
}

void gaspi_capi_printf_impl (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  gaspi_capi_vprint (fmt, ap);
  va_end (ap);
}

void gaspi_capi_printf_to_impl (gaspi_rank_t rank, const char *fmt, ...)
{
  gaspi_rank_t me = 0;
  va_list ap;
  if (gaspi_proc_rank (&me) != GASPI_SUCCESS || me != rank)
    return;
  va_start (ap, fmt);
  gaspi_capi_vprint (fmt, ap);
  va_end (ap);
}
