/* The strategy search (lib/strategy/plan_search) against enumerating every
 * plan: random line networks, ResNet-like blocks and random DAGs of up to 8
 * layers x 4 candidates, the longest-path fallback on line networks, ruled
 * out candidates, ties and malformed problems. */
#include <math.h>
#include <stdlib.h>

#include "../common/expect.h"
#include "strategy/plan_search.h"

enum { MAX_LAYERS = 8, MAX_CHOICES = 4 };

typedef struct {
    int layers, choices[MAX_LAYERS];
    int offset[MAX_LAYERS + 1], parents[MAX_LAYERS * MAX_LAYERS];
    double node[MAX_LAYERS][MAX_CHOICES];
    double edge[MAX_LAYERS][MAX_LAYERS][MAX_CHOICES][MAX_CHOICES];
} table;

static double node_cost(void *ctx, int l, int c) { return ((table *)ctx)->node[l][c]; }

static double edge_cost(void *ctx, int p, int pc, int l, int c)
{
    return ((table *)ctx)->edge[p][l][pc][c];
}

static plan_problem problem_of(table *t)
{
    return (plan_problem){t->layers, t->choices, t->offset, t->parents, node_cost, edge_cost, t};
}

static unsigned next(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) & 0xffffff;
}

/* Random costs; a few candidates ruled out when `holes`. */
static void fill_costs(table *t, unsigned *s, int holes)
{
    for (int l = 0; l < t->layers; l++) {
        t->choices[l] = 1 + (int)(next(s) % MAX_CHOICES);
        for (int c = 0; c < MAX_CHOICES; c++)
            t->node[l][c] = holes && next(s) % 7 == 0 ? INFINITY : (double)(next(s) % 1000);
    }
    for (int p = 0; p < MAX_LAYERS; p++)
        for (int l = 0; l < MAX_LAYERS; l++)
            for (int a = 0; a < MAX_CHOICES; a++)
                for (int b = 0; b < MAX_CHOICES; b++)
                    t->edge[p][l][a][b] = a == b ? 0 : (double)(next(s) % 400);
}

static void add_parents(table *t, int l, const int *list, int n)
{
    t->offset[l + 1] = t->offset[l];
    for (int i = 0; i < n; i++) t->parents[t->offset[l + 1]++] = list[i];
}

static void make_line(table *t, int layers)
{
    t->layers = layers;
    t->offset[0] = 0;
    for (int l = 0; l < layers; l++) {
        int p = l - 1;
        add_parents(t, l, &p, l > 0);
    }
}

/* input -> [conv -> conv] + skip -> add, twice (a ResNet's two blocks). */
static void make_resnet(table *t)
{
    static const int parents[8][2] = {{-1, -1}, {0, -1}, {1, -1}, {0, 2},
                                      {3, -1},  {4, -1}, {3, 5},  {6, -1}};
    t->layers = 8;
    t->offset[0] = 0;
    for (int l = 0; l < 8; l++) {
        int n = (parents[l][0] >= 0) + (parents[l][1] >= 0);
        add_parents(t, l, parents[l], n);
    }
}

/* Random DAG: every layer after the first has 1-3 earlier parents. */
static void make_dag(table *t, int layers, unsigned *s)
{
    t->layers = layers;
    t->offset[0] = 0;
    for (int l = 0; l < layers; l++) {
        int list[3], n = 0, want = l == 0 ? 0 : 1 + (int)(next(s) % 3);
        for (int i = 0; i < want; i++) {
            int p = (int)(next(s) % (unsigned)l), seen = 0;
            for (int j = 0; j < n; j++) seen |= list[j] == p;
            if (!seen) list[n++] = p;
        }
        add_parents(t, l, list, n);
    }
}

/* The cheapest plan by trying all of them (first found wins ties). */
static double brute_force(table *t, int *best)
{
    plan_problem p = problem_of(t);
    int choice[MAX_LAYERS] = {0};
    double best_cost = INFINITY;
    for (;;) {
        double cost = plan_cost(&p, choice);
        if (cost < best_cost) {
            best_cost = cost;
            for (int l = 0; l < t->layers; l++) best[l] = choice[l];
        }
        int l = t->layers - 1; /* next plan, last layer fastest */
        while (l >= 0 && ++choice[l] == t->choices[l]) choice[l--] = 0;
        if (l < 0) return best_cost;
    }
}

static void compare(table *t, size_t max_states, const char *what, int trial)
{
    plan_problem p = problem_of(t);
    int choice[MAX_LAYERS], expected[MAX_LAYERS];
    double total = -1, want = brute_force(t, expected);
    plan_method method;
    pcnn_status st = plan_search(&p, max_states, choice, &total, &method);
    if (isinf(want)) {
        EXPECT(st == PCNN_ERR_SHAPE, "%s %d: infeasible plan gave %d", what, trial, st);
        return;
    }
    EXPECT(st == PCNN_OK, "%s %d: status %d (%s)", what, trial, st, pcnn_last_error());
    EXPECT(total == want, "%s %d: cost %g, brute force %g", what, trial, total, want);
    EXPECT(plan_cost(&p, choice) == total, "%s %d: reported cost is not the plan's", what, trial);
    EXPECT(max_states == 1 || method == PLAN_EXACT, "%s %d: method %d", what, trial, (int)method);
}

static void test_against_brute_force(void)
{
    unsigned s = 12345;
    table t;
    for (int trial = 0; trial < 300; trial++) {
        make_line(&t, 1 + trial % MAX_LAYERS);
        fill_costs(&t, &s, trial % 3 == 0);
        compare(&t, 0, "line", trial);
        compare(&t, 1, "line (longest paths)", trial); /* exact on a line */
        make_resnet(&t);
        fill_costs(&t, &s, trial % 3 == 0);
        compare(&t, 0, "resnet", trial);
        make_dag(&t, 2 + trial % (MAX_LAYERS - 1), &s);
        fill_costs(&t, &s, trial % 3 == 0);
        compare(&t, 0, "dag", trial);
    }
}

/* The fallback on branching graphs: a valid, finite plan, never cheaper
 * than the optimum. */
static void test_fallback_branching(void)
{
    unsigned s = 777;
    table t;
    for (int trial = 0; trial < 100; trial++) {
        make_resnet(&t);
        fill_costs(&t, &s, 0);
        plan_problem p = problem_of(&t);
        int choice[MAX_LAYERS], best[MAX_LAYERS];
        double total, want = brute_force(&t, best);
        plan_method method;
        EXPECT(plan_search(&p, 1, choice, &total, &method) == PCNN_OK, "fallback %d", trial);
        EXPECT(method == PLAN_LONGEST_PATHS, "fallback %d: method %d", trial, (int)method);
        EXPECT(total >= want && isfinite(total), "fallback %d: %g below optimum %g", trial,
               total, want);
        for (int l = 0; l < t.layers; l++)
            EXPECT(choice[l] >= 0 && choice[l] < t.choices[l], "fallback %d: choice", trial);
    }
}

static void test_ties_and_errors(void)
{
    table t = {0};
    make_line(&t, 3);
    for (int l = 0; l < 3; l++) t.choices[l] = 3; /* all costs 0: lowest index wins */
    plan_problem p = problem_of(&t);
    int choice[3] = {9, 9, 9};
    double total;
    plan_method method;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_OK, "ties");
    EXPECT(choice[0] == 0 && choice[1] == 0 && choice[2] == 0 && total == 0, "ties: %d %d %d",
           choice[0], choice[1], choice[2]);

    t.node[1][0] = NAN;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_INVALID_ARGUMENT, "NaN");
    t.node[1][0] = -1;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_INVALID_ARGUMENT, "negative");
    t.node[1][0] = t.node[1][1] = t.node[1][2] = INFINITY;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_SHAPE, "all ruled out");
    t.node[1][0] = 0;
    t.parents[0] = 2; /* layer 1's parent after it */
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_INVALID_ARGUMENT, "order");
    t.parents[0] = 0;
    t.choices[2] = 0;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_INVALID_ARGUMENT, "choices");
    t.choices[2] = 3;
    p.layers = 0;
    EXPECT(plan_search(&p, 0, choice, &total, &method) == PCNN_ERR_INVALID_ARGUMENT, "empty");
}

int main(void)
{
    test_against_brute_force();
    test_fallback_branching();
    test_ties_and_errors();
    if (failures) printf("%d failure(s)\n", failures);
    else printf("plan search: all checks passed\n");
    return failures ? 1 : 0;
}
