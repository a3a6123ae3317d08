# frontier.mk — the quality frontier on stories260K (SPEC §11): hybrid
# students that keep K of the teacher's 5 softmax layers, against the pure
# student of the recipe (recipes/stories260k.mk, whose rules and variables
# this file includes) at the same budget.
#
#   make -f recipes/frontier.mk OUT=DIR [SEED=1] [BUDGET=1000000] [BIN=build/bin]
#
# For K = 1 and 2 the kept layers are chosen
#  - by KL: hm-rank-layers on the pure student hedgemamba.st (the gain of
#    restoring each layer to the teacher's attention, on RANK_WINDOWS corpus
#    windows: not the held-out text the table reports), the first K;
#  - by position, as a control: evenly spaced, POS_1 = the middle layer 2,
#    POS_2 = layers 1 and 3.
# Every hybrid runs the recipe's own pipeline with --keep-attention: mapped
# from the teacher with the decay from its attention, stage 1b on
# BRIDGE_PCT % (the kept layers frozen: they are the teacher's), stage 2
# distillation on the rest. DIR/frontier.json and DIR/frontier.md: held-out
# perplexity, the generation figures (hm-eval --teacher), and decoding
# tokens/s and state memory at contexts of BENCH_CTX (batch BENCH_BATCH, one
# shared random prompt, BENCH_DECODE steps; hm-generate --bench).
include recipes/stories260k.mk
.DEFAULT_GOAL := frontier

RANK_WINDOWS ?= 32
POS_1 ?= 2
POS_2 ?= 1,3
BENCH_CTX ?= 4096 16384
BENCH_BATCH ?= 8
BENCH_DECODE ?= 64
HYBRIDS = kl1 kl2 pos1 pos2
FMODELS = teacher hedgemamba $(addprefix hybrid-,$(HYBRIDS))
FEVALS = $(foreach m,$(FMODELS),$(OUT)/$(m).held.json $(OUT)/$(m).gen.json) \
         $(foreach m,hedgemamba $(addprefix hybrid-,$(HYBRIDS)), \
           $(foreach n,$(BENCH_CTX),$(OUT)/$(m).bench$(n).json))

.PHONY: frontier
frontier: $(OUT)/frontier.md $(if $(BENCH_CTX),$(OUT)/frontier.png)

# the KL ranking of the pure student's layers (on corpus windows)
$(OUT)/ranking.json: $(OUT)/hedgemamba.st $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-rank-layers
	$(BIN)/hm-rank-layers $< --teacher $(OUT)/teacher.st --data $(OUT)/corpus.tok \
	    --seq-len $(SEQ) --windows $(RANK_WINDOWS) --keep 2 --threads $(THREADS) --json -q > $@

$(OUT)/keep-kl1.txt: $(OUT)/ranking.json
	python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["ranking"][:1])))' $< > $@
$(OUT)/keep-kl2.txt: $(OUT)/ranking.json
	python3 -c 'import json,sys; print(",".join(map(str, sorted(json.load(open(sys.argv[1]))["ranking"][:2]))))' $< > $@
$(OUT)/keep-pos1.txt: | $(OUT)/.dir
	echo $(POS_1) > $@
$(OUT)/keep-pos2.txt: | $(OUT)/.dir
	echo $(POS_2) > $@

# the recipe with the layers of keep-X.txt kept softmax
$(OUT)/hmapped-%.st: $(OUT)/keep-%.txt $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-map-ssm
	$(BIN)/hm-map-ssm $(OUT)/teacher.st -o $@ -f -q $(DECAY) --threads $(THREADS) \
	    --keep-attention $$(cat $<)
$(OUT)/hbridge-%.st: $(OUT)/hmapped-%.st $(OUT)/teacher.st $(BIN)/hm-finetune
	$(BIN)/hm-finetune $< -o $@ -f $(TRAIN) --align $(OUT)/teacher.st --align-loss $(ALIGN_LOSS) \
	    --lr $(ALIGN_LR) --warmup 5 --tokens $(BRIDGE_TOKENS) --log $(OUT)/hbridge-$*.log.jsonl
$(OUT)/hybrid-%.st: $(OUT)/hbridge-%.st $(OUT)/teacher.st $(BIN)/hm-finetune
	$(BIN)/hm-finetune $< -o $@ -f $(S2) --tokens $(REST_TOKENS) --log $(OUT)/hybrid-$*.log.jsonl

# decoding speed and memory at a long context (the teacher's 512 positions
# do not reach it: the students have no position limit)
define BENCH_RULE
$(OUT)/%.bench$(1).json: $(OUT)/%.st $(BIN)/hm-generate
	$(BIN)/hm-generate --bench --context $(1) --batch $(BENCH_BATCH) --decode-tokens $(BENCH_DECODE) \
	    --shared-prompt --threads $(THREADS) --json $$< > $$@
endef
$(foreach n,$(BENCH_CTX),$(eval $(call BENCH_RULE,$(n))))

$(OUT)/frontier.json: $(FEVALS) $(foreach h,$(HYBRIDS),$(OUT)/keep-$(h).txt) $(OUT)/ranking.json recipes/frontier_results.py
	python3 recipes/frontier_results.py json $(OUT) "$(HYBRIDS)" "$(BENCH_CTX)" $(BUDGET) > $@.tmp && mv $@.tmp $@

$(OUT)/frontier.md: $(OUT)/frontier.json recipes/frontier_results.py
	python3 recipes/frontier_results.py md $(OUT) "$(HYBRIDS)" "$(BENCH_CTX)" $(BUDGET) > $@.tmp && mv $@.tmp $@
	@cat $@

# keep every stage of the hybrids (chained pattern rules would delete them)
.PRECIOUS: $(OUT)/keep-%.txt $(OUT)/hmapped-%.st $(OUT)/hbridge-%.st $(OUT)/hybrid-%.st

# the plot (both seeds of docs/results.md: recipes/frontier_plot.sh PNG DIR1/frontier.json DIR2/frontier.json)
$(OUT)/frontier.png: $(OUT)/frontier.json recipes/frontier_plot.sh
	sh recipes/frontier_plot.sh $@ $<
