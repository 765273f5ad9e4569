/* The smallest GASPI program: start, say who we are, meet, end. */
#include "check.h"

int main (void)
{
  gaspi_rank_t rank, num;
  gaspi_number_t inited = 1;

  CHECK (gaspi_initialized (&inited));
  ASSERT (inited == 0);
  CHECK (gaspi_proc_init (GASPI_BLOCK));
  CHECK (gaspi_initialized (&inited));
  ASSERT (inited == 1);
  CHECK (gaspi_proc_rank (&rank));
  CHECK (gaspi_proc_num (&num));
  ASSERT (rank < num);
  gaspi_printf ("hello from rank %d of %d (%s %.1f)\n", rank, num, "pi", 3.14);
  gaspi_printf_to (0, "only rank 0 says %s\n", "this");
  CHECK (gaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK));
  CHECK (gaspi_proc_term (GASPI_BLOCK));
  CHECK (gaspi_initialized (&inited));
  ASSERT (inited == 0);
  return 0;
}
