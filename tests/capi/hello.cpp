// The C interface used from C++: GASPI.h under extern "C", RAII around
// init/term, std::vector buffers, a lambda as the user reduction.
#include <GASPI.h>
#include <GASPI_Ext.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace
{
void check (gaspi_return_t r, const char *what)
{
  if (r != GASPI_SUCCESS)
    throw std::runtime_error (std::string (what) + ": " + gaspi_error_str (r));
}

struct Runtime
{
  Runtime () { check (gaspi_proc_init (GASPI_BLOCK), "gaspi_proc_init"); }
  ~Runtime () { gaspi_proc_term (GASPI_BLOCK); }
};

static_assert (sizeof (gaspi_config_t) == 144, "gaspi_config_t");
static_assert (GASPI_BLOCK == 0xffffffffffffffffUL, "GASPI_BLOCK is a constant in C++");
} // namespace

int main ()
try
  {
    Runtime runtime;
    gaspi_rank_t rank, num;
    check (gaspi_proc_rank (&rank), "rank");
    check (gaspi_proc_num (&num), "num");

    std::vector<double> send (16), recv (16);
    std::iota (send.begin (), send.end (), double (rank));
    check (gaspi_allreduce (send.data (), recv.data (), gaspi_number_t (send.size ()),
                            GASPI_OP_SUM, GASPI_TYPE_DOUBLE, GASPI_GROUP_ALL, GASPI_BLOCK),
           "allreduce");
    for (std::size_t i = 0; i < recv.size (); i++)
      {
        double want = num * double (i) + num * (num - 1) / 2.0;
        if (recv[i] != want)
          throw std::runtime_error ("allreduce sum is wrong at " + std::to_string (i));
      }

    // A captureless lambda converts to the C function pointer type.
    gaspi_reduce_operation_t product
        = [] (gaspi_pointer_t const a, gaspi_pointer_t const b, gaspi_pointer_t const out,
              gaspi_reduce_state_t const, const gaspi_number_t n, const gaspi_size_t,
              const gaspi_timeout_t) -> gaspi_return_t {
      for (gaspi_number_t i = 0; i < n; i++)
        static_cast<long *> (out)[i] = static_cast<long *> (a)[i] * static_cast<long *> (b)[i];
      return GASPI_SUCCESS;
    };
    long mine = rank + 2, all = 0;
    check (gaspi_allreduce_user (&mine, &all, 1, sizeof (long), product, nullptr,
                                 GASPI_GROUP_ALL, GASPI_BLOCK),
           "allreduce_user");
    long want = 1;
    for (int r = 0; r < num; r++)
      want *= r + 2;
    if (all != want)
      throw std::runtime_error ("allreduce_user product is wrong");
    std::printf ("rank %d: C++ checked\n", rank);
    return 0;
  }
catch (const std::exception &e)
  {
    std::fprintf (stderr, "error: %s\n", e.what ());
    return 1;
  }
