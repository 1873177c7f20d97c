/*
 * check_train.h - what the train suite's two files share: the compact graph
 * notation and the small helpers check_train.c defines, and the hooks by
 * which check_train_runs.c fills the suite's "plans", "learning" and
 * "state" cases, so `check_remat train` still runs every training test.
 */
#ifndef REMAT_CHECK_TRAIN_H
#define REMAT_CHECK_TRAIN_H

#include "test_util.h"
#include "train/engine.h"

/* check_train.c: the notation (see dsl()) and helpers both files use. */
char *dsl(const char *text);
remat_analysis *analyze_dsl(const char *text, remat_graph **g);
remat_trainer *trainer_of(const remat_analysis *a);
void store_all(const remat_analysis *a, remat_schedule *s);
double det_uniform(uint64_t *s);
double ld_f64(const uint8_t *p, uint64_t i);

/* check_train_runs.c: each adds its tests to the case it names. */
void train_plans_tests(TCase *tc);
void train_learning_tests(TCase *tc);
void train_state_tests(TCase *tc);

#endif
