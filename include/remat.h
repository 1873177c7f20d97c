/*
 * remat.h - umbrella header: everything a C caller needs.
 *
 * Pipeline: load (remat/graph.h) -> analyze (remat/analyze.h) -> replay
 * (remat/schedule.h, remat/exec.h: the one judge of every peak) -> allocator
 * and static offsets (remat/alloc.h) -> plan (remat/plan.h, remat/compare.h)
 * -> reports and traces (remat/report.h, remat/trace.h); beside them the
 * training-state ledger (remat/ledger.h), real training (remat/state.h,
 * remat/train.h), importers (remat/import.h) and synthetic graphs
 * (remat/gen.h). src/README.md maps each header to its folder. See
 * README.md for a usage example. Every header in include/remat/ is included
 * here (tests/install_test.sh checks it); REMAT_VERSION_STRING and
 * remat_version() are in remat/util.h.
 */
#ifndef REMAT_H
#define REMAT_H

#include "remat/util.h"
#include "remat/graph.h"
#include "remat/import.h"
#include "remat/analyze.h"
#include "remat/ledger.h"
#include "remat/gen.h"
#include "remat/schedule.h"
#include "remat/exec.h"
#include "remat/alloc.h"
#include "remat/state.h"
#include "remat/train.h"
#include "remat/report.h"
#include "remat/plan.h"
#include "remat/trace.h"
#include "remat/compare.h"
#include "remat/pipeline.h"

#endif
