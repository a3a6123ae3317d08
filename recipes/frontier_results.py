#!/usr/bin/env python3
"""frontier_results.py json|md|dat OUT HYBRIDS CONTEXTS BUDGET — the frontier
table of recipes/frontier.mk from its evaluation files: one row per model
(the teacher, the pure student, each hybrid) with its kept layers, held-out
perplexity, the generation figures against the teacher, and decoding
tokens/s and state memory at each context (hm-generate --bench). dat: the
plot's columns (held-out PPL, decode tokens/s at the last context)."""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    mode, out, hybrids, contexts, budget = sys.argv[1:6]
    hybrids, contexts = hybrids.split(), [int(c) for c in contexts.split()]
    if mode in ("md", "dat"):
        rows = load(os.path.join(out, "frontier.json"))
    else:
        ranking = load(os.path.join(out, "ranking.json"))
        rows = {"recipe": "frontier", "budget_tokens": int(budget), "ranking": ranking,
                "contexts": contexts, "rows": []}
        models = ["teacher", "hedgemamba"] + ["hybrid-" + h for h in hybrids]
        for m in models:
            held = load(os.path.join(out, m + ".held.json"))
            gen = load(os.path.join(out, m + ".gen.json"))["quality"]
            if m == "teacher":
                kept, how = "all", "-"
            elif m == "hedgemamba":
                kept, how = "", "-"
            else:
                with open(os.path.join(out, "keep-" + m[len("hybrid-"):] + ".txt")) as f:
                    kept = f.read().strip()
                how = "KL" if m.startswith("hybrid-kl") else "position"
            r = {"model": m, "kept": kept, "chosen_by": how, "held_ppl": held["ppl"],
                 "held_targets": held["targets"], "kl": gen["kl"], "agreement": gen["agreement"],
                 "gen_nll": gen["student_nll"], "teacher_gen_nll": gen["teacher_nll"],
                 "common_prefix": gen["common_prefix"], "gen_prompts": gen["prompts"],
                 "gen_new": gen["new_tokens"], "gen_seed": gen["seed"], "bench": {}}
            for n in contexts:
                p = os.path.join(out, "%s.bench%d.json" % (m, n))
                if os.path.exists(p):
                    b = load(p)
                    r["bench"][str(n)] = {"decode_tokens_per_s": b["decode_tokens_per_s"],
                                          "state_bytes": b["state_bytes"],
                                          "peak_rss_bytes": b["peak_rss_bytes"],
                                          "batch": b["batch"]}
            rows["rows"].append(r)
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    R = rows["rows"]
    tppl = R[0]["held_ppl"]
    if mode == "dat":
        last = str(rows["contexts"][-1])
        for r in R:
            if last in r["bench"]:
                print('"%s" %.6f %.3f' % (r["model"], r["held_ppl"],
                                          r["bench"][last]["decode_tokens_per_s"]))
        return
    head = "| model | kept layers | chosen by | held-out PPL | vs teacher | KL | agreement | gen NLL | prefix |"
    sep = "|---|---|---|---|---|---|---|---|---|"
    for n in rows["contexts"]:
        k = "%dk" % (n // 1024) if n % 1024 == 0 else str(n)
        head += " decode tok/s @%s | state MB @%s |" % (k, k)
        sep += "---|---|"
    print(head)
    print(sep)
    for r in R:
        line = "| %s | %s | %s | %.3f | %+.1f %% | %.4f | %.3f | %.3f | %.1f |" % (
            r["model"], r["kept"] or "none", r["chosen_by"], r["held_ppl"],
            100 * (r["held_ppl"] / tppl - 1), r["kl"], r["agreement"], r["gen_nll"],
            r["common_prefix"])
        for n in rows["contexts"]:
            b = r["bench"].get(str(n))
            line += (" %.0f | %.2f |" % (b["decode_tokens_per_s"], b["state_bytes"] / 1e6)
                     if b else " n/a | n/a |")
        print(line)
    g = R[0]
    rk = rows["ranking"]
    print()
    dec = ""
    if R[1]["bench"]:  # no contexts benched: no decoding sentence
        dec = (" Decoding: batch %d, one shared random prompt of the context, hm-generate "
               "--bench; the teacher (512 positions) cannot reach these contexts." %
               next(iter(R[1]["bench"].values()))["batch"])
    print("Budget %d tokens; held-out: %d targets. Generation: %d prompts, %d new tokens at "
          "temperature 1 (seed %d), scored by the teacher (its own samples: %.3f).%s KL "
          "ranking of the pure student's layers (hm-rank-layers, %d corpus windows): %s, "
          "gains %s." % (
              rows["budget_tokens"], g["held_targets"], g["gen_prompts"], g["gen_new"],
              g["gen_seed"], g["teacher_gen_nll"], dec, rk["windows"], rk["ranking"],
              ", ".join("%d: %+.4f" % (x["layer"], x["gain"]) for x in rk["layers"])))


if __name__ == "__main__":
    main()
