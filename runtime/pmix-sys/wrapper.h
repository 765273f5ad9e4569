/* The header bindgen reads: PMIx's client interface (it includes
 * pmix_common.h, the types, attribute names and status codes). */
#include <pmix.h>
