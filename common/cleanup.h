/* SPDX-License-Identifier: BSD-3-Clause (see LICENSE) */
/* The scope-exit helpers now live in common/utils/cleanup.h; this name
 * is kept for the server files that include "cleanup.h" through
 * -I common.
 */
#include "utils/cleanup.h"
