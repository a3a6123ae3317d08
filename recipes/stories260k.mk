# stories260k.mk — the whole recipe on a really pretrained teacher:
# llama2.c's stories260K (a Llama, 5 layers, d 64, GQA 8:4, vocab 512),
# distilled on text it samples itself (recipes/stories_common.mk).
#
#   make -f recipes/stories260k.mk OUT=DIR [BIN=build/bin] [THREADS=N]
#
# leaves DIR/teacher.st, hedgemamba.st (stage 1 on 10 % of BUDGET, hm-map-ssm
# proven by hm-verify mapping, stage 2 on 90 %), and the baselines on the
# same total tokens: hedgehog-ft.st (stage 1 + cross-entropy), skip-stage1.st
# (mapped straight from the teacher), naive.st (random mixer), control.st
# (the teacher fine-tuned on the same data); DIR/results.json (one row per
# model: held-out and TinyStories perplexities, multiple-choice accuracy)
# and DIR/results.md; the student packed (hedgemamba.bundle.tar.gz) and
# text generated from the bundle (hedgemamba.samples.txt).
OUT ?= out/stories260k
BUDGET ?= 1000000
STAGE1_TOKENS = $(shell echo $$(( $(BUDGET) / 10 )))
STAGE2_TOKENS = $(shell echo $$(( $(BUDGET) - $(BUDGET) / 10 )))
# stage 2's peak LR from a sweep at this budget (held-out PPL of the
# HedgeMamba, docs/results.md): 1e-3 5.29, 3e-3 4.80, 1e-2 5.07; every
# cross-entropy run here (students and control) uses the same schedule
STAGE1_LR ?= 1e-2
STAGE2_LR ?= 3e-3
SEED ?= 1
.DEFAULT_GOAL := all
include recipes/stories_common.mk

TRAIN = --data $(OUT)/corpus.tok --batch $(BATCH) --seq-len $(SEQ) --threads $(THREADS) \
        --seed $(SEED) --no-progress -q
# stage 2 and every cross-entropy baseline: the same schedule, embeddings frozen
CE = $(TRAIN) --lr $(STAGE2_LR) --warmup 20 --freeze embeddings

MODELS = teacher control hedgemamba hedgehog-ft skip-stage1 naive
EVALS = $(foreach m,$(MODELS),$(OUT)/$(m).held.json $(OUT)/$(m).ts.json $(OUT)/$(m).mc.json)

.PHONY: all
all: $(OUT)/results.md $(OUT)/hedgemamba.samples.txt

# Each training run's command line is kept in NAME.cmd (recipes/stories_common.mk
# CMD_FILE): changing a variable reruns the runs whose command it changes.
RUN_hedgehog = $(BIN)/hm-linearize $(OUT)/teacher.st -o $(OUT)/hedgehog.st -f $(TRAIN) \
    --tokens $(STAGE1_TOKENS) --lr $(STAGE1_LR) --log $(OUT)/hedgehog.log.jsonl
RUN_hedgemamba = $(BIN)/hm-finetune $(OUT)/hedgemamba-init.st -o $(OUT)/hedgemamba.st -f $(CE) \
    --tokens $(STAGE2_TOKENS) --log $(OUT)/hedgemamba.log.jsonl
RUN_hedgehog-ft = $(BIN)/hm-finetune $(OUT)/hedgehog.st -o $(OUT)/hedgehog-ft.st -f $(CE) \
    --tokens $(STAGE2_TOKENS) --log $(OUT)/hedgehog-ft.log.jsonl
RUN_skip-stage1 = $(BIN)/hm-finetune $(OUT)/skip-stage1-init.st -o $(OUT)/skip-stage1.st -f $(CE) \
    --tokens $(BUDGET) --log $(OUT)/skip-stage1.log.jsonl
RUN_naive = $(BIN)/hm-finetune $(OUT)/naive-init.st -o $(OUT)/naive.st -f $(CE) \
    --tokens $(BUDGET) --log $(OUT)/naive.log.jsonl
RUN_control = $(BIN)/hm-finetune $(OUT)/teacher.st -o $(OUT)/control.st -f $(CE) \
    --tokens $(BUDGET) --log $(OUT)/control.log.jsonl
RUN_naive-init = $(BIN)/hm-map-ssm $(OUT)/teacher.st -o $(OUT)/naive-init.st -f -q --init random --seed $(SEED)
RUNS = hedgehog hedgemamba hedgehog-ft skip-stage1 naive control naive-init
$(foreach r,$(RUNS),$(eval $(call CMD_FILE,$(OUT)/$(r),$(strip $(RUN_$(r))))))

# stage 1: feature maps against the teacher's attention outputs
$(OUT)/hedgehog.st: $(OUT)/hedgehog.cmd $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-linearize
	$(RUN_hedgehog)

$(OUT)/hedgemamba-init.st: $(OUT)/hedgehog.st $(BIN)/hm-map-ssm
	$(BIN)/hm-map-ssm $< -o $@ -f -q

$(OUT)/mapping.verify.json: $(OUT)/hedgehog.st $(OUT)/hedgemamba-init.st $(OUT)/held.tok $(BIN)/hm-verify
	$(BIN)/hm-verify mapping $(OUT)/hedgehog.st $(OUT)/hedgemamba-init.st --data $(OUT)/held.tok \
	    --seq-len $(SEQ) --max-windows 8 --json > $@

$(OUT)/hedgemamba.st: $(OUT)/hedgemamba.cmd $(OUT)/hedgemamba-init.st $(OUT)/mapping.verify.json $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(RUN_hedgemamba)

$(OUT)/hedgehog-ft.st: $(OUT)/hedgehog-ft.cmd $(OUT)/hedgehog.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(RUN_hedgehog-ft)

$(OUT)/skip-stage1-init.st: $(OUT)/teacher.st $(BIN)/hm-map-ssm
	$(BIN)/hm-map-ssm $< -o $@ -f -q

$(OUT)/naive-init.st: $(OUT)/naive-init.cmd $(OUT)/teacher.st $(BIN)/hm-map-ssm
	$(RUN_naive-init)

$(OUT)/skip-stage1.st: $(OUT)/skip-stage1.cmd $(OUT)/skip-stage1-init.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(RUN_skip-stage1)

$(OUT)/naive.st: $(OUT)/naive.cmd $(OUT)/naive-init.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(RUN_naive)

$(OUT)/control.st: $(OUT)/control.cmd $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(RUN_control)

$(OUT)/results.json: $(EVALS) $(OUT)/mapping.verify.json $(OUT)/corpus.tok recipes/stories_results.sh
	OUT=$(OUT) BIN=$(BIN) MODELS="$(MODELS)" BUDGET=$(BUDGET) sh recipes/stories_results.sh json > $@.tmp && mv $@.tmp $@

$(OUT)/results.md: $(OUT)/results.json recipes/stories_results.sh
	OUT=$(OUT) BIN=$(BIN) MODELS="$(MODELS)" BUDGET=$(BUDGET) sh recipes/stories_results.sh md > $@.tmp && mv $@.tmp $@
	@cat $@

# the student leaves the lab: a bundle (with its tokenizer), verified, text from it
$(OUT)/hedgemamba.bundle.tar.gz: $(OUT)/hedgemamba.st $(BIN)/hm-pack
	$(BIN)/hm-pack $< -o $@ --tokenizer $(TOKENIZER) -f -q

$(OUT)/hedgemamba.samples.txt: $(OUT)/hedgemamba.bundle.tar.gz $(BIN)/hm-verify $(BIN)/hm-generate
	$(BIN)/hm-verify bundle $< > $@.tmp
	$(BIN)/hm-generate $< --samples 3 --seed 7 --max-new-tokens 200 --temperature 0.8 \
	    --threads $(THREADS) >> $@.tmp && mv $@.tmp $@
