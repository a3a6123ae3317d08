# convert.mk — a real conversion with the paper's recipe (contract §4), shared
# by recipes/pythia.mk and recipes/llama.mk (which set the family defaults
# and include this file):
#
#   make -f recipes/pythia.mk TEACHER=path/to/pythia-160m DATA=owt.tar.xz [OUT=DIR]
#   make -f recipes/pythia.mk TEACHER=... plan      the plan, with time and memory
#                                                    estimates measured on this machine
#
# TEACHER: a HuggingFace model folder (config.json + model.safetensors or a
# sharded index), a safetensors file or a bundle. DATA: text, jsonl or an
# archive of documents (hm-tokenize). Stages: tokenize (VAL_FRACTION held
# out) → stage 1 (hm-linearize, STAGE1_TOKENS) → hm-map-ssm → hm-verify
# mapping → stage 2 (hm-finetune, STAGE2_TOKENS) → evaluations of teacher and
# student → hm-pack bundle with ONNX. A training stage that was interrupted
# (its OUT.state is there, saved every SAVE_EVERY steps) resumes bit for bit.
#
# The paper's hyper-parameters (Pythia-1B): batch 48 x 1024, AdamW (0.9,
# 0.95), warm-up then cosine to 0.1 x peak, peak LR 0.01, stage 1 = 1B tokens
# (20K steps), stage 2 = 9B (180K steps). The paper gives one peak LR (for
# 1B); hm uses it for every size unless STAGE1_LR / STAGE2_LR say otherwise,
# and `plan` says so.
TEACHER ?=
DATA ?=
OUT ?= out/convert
BIN ?= build/bin
THREADS ?= $(shell nproc 2>/dev/null || echo 2)
TOKENIZER ?= $(if $(wildcard $(TEACHER)/tokenizer.json),$(TEACHER)/tokenizer.json,)
BATCH ?= 48
SEQ ?= 1024
STAGE1_TOKENS ?= 1000000000
STAGE2_TOKENS ?= 9000000000
STAGE1_LR ?= 0.01
STAGE2_LR ?= 0.01
WARMUP ?= 1000
VAL_FRACTION ?= 0.001
SEED ?= 1
SAVE_EVERY ?= 1000
TRAIN = --data $(OUT)/train.tok --val-data $(OUT)/train.val.tok --batch $(BATCH) \
        --seq-len $(SEQ) --threads $(THREADS) --seed $(SEED) --warmup $(WARMUP) \
        --save-every $(SAVE_EVERY) $(if $(wildcard $@.state),--resume,)
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.PHONY: all plan check-vars

check-vars:
	@[ -n "$(TEACHER)" ] || { echo "convert: set TEACHER=path/to/model (a HuggingFace folder)" >&2; exit 2; }

all: check-vars $(OUT)/student.bundle $(OUT)/teacher.eval.json $(OUT)/student.eval.json

plan: check-vars
	@TEACHER="$(TEACHER)" BIN="$(BIN)" THREADS="$(THREADS)" BATCH="$(BATCH)" SEQ="$(SEQ)" \
	 STAGE1_TOKENS="$(STAGE1_TOKENS)" STAGE2_TOKENS="$(STAGE2_TOKENS)" STAGE1_LR="$(STAGE1_LR)" \
	 STAGE2_LR="$(STAGE2_LR)" FAMILY="$(FAMILY)" sh recipes/plan.sh

$(OUT)/.dir:
	mkdir -p $(OUT) && touch $@

$(OUT)/train.tok: $(DATA) | $(OUT)/.dir check-vars
	@[ -n "$(DATA)" ] || { echo "convert: set DATA=corpus (text, jsonl or an archive)" >&2; exit 2; }
	@[ -n "$(TOKENIZER)" ] || { echo "convert: set TOKENIZER=tokenizer.json (none in $(TEACHER))" >&2; exit 2; }
	$(BIN)/hm-tokenize --tokenizer $(TOKENIZER) $(DATA) -o $@ --val-fraction $(VAL_FRACTION) \
	    --seed $(SEED) -f --progress

$(OUT)/train.val.tok: $(OUT)/train.tok

$(OUT)/hedgehog.st: $(OUT)/train.tok $(OUT)/train.val.tok
	$(BIN)/hm-linearize $(TEACHER) -o $@ $(TRAIN) --tokens $(STAGE1_TOKENS) --lr $(STAGE1_LR) \
	    --log $(OUT)/hedgehog.log.jsonl

$(OUT)/hedgemamba-init.st: $(OUT)/hedgehog.st
	$(BIN)/hm-map-ssm $< -o $@ -f

$(OUT)/mapping.verify.json: $(OUT)/hedgehog.st $(OUT)/hedgemamba-init.st $(OUT)/train.val.tok
	$(BIN)/hm-verify mapping $(OUT)/hedgehog.st $(OUT)/hedgemamba-init.st \
	    --data $(OUT)/train.val.tok --seq-len $(SEQ) --max-windows 4 --json > $@

$(OUT)/student.st: $(OUT)/hedgemamba-init.st $(OUT)/mapping.verify.json
	$(BIN)/hm-finetune $< -o $@ $(TRAIN) --tokens $(STAGE2_TOKENS) --lr $(STAGE2_LR) \
	    --freeze embeddings --log $(OUT)/student.log.jsonl

$(OUT)/teacher.eval.json: $(OUT)/train.val.tok
	$(BIN)/hm-eval $(TEACHER) --data $< --seq-len $(SEQ) --threads $(THREADS) --json > $@

$(OUT)/student.eval.json: $(OUT)/student.st $(OUT)/train.val.tok
	$(BIN)/hm-eval $< --data $(OUT)/train.val.tok --seq-len $(SEQ) --threads $(THREADS) --json > $@

$(OUT)/student.bundle: $(OUT)/student.st $(OUT)/student.eval.json
	$(BIN)/hm-pack $< -o $@ --tokenizer $(TOKENIZER) --onnx -f
	$(BIN)/hm-verify bundle $@
