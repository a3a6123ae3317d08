# demo.mk — the embedded demo: a tiny byte-level teacher trained on real
# English text that a Debian package ships (fortunes), then its held-out
# perplexity. Real file dependencies: a second `make demo` does nothing.
# The stage issues extend this file (linearize → map-ssm → finetune).
#
#   make demo                      (from the top level; builds hm first)
#   make -f recipes/demo.mk DEMO=out/demo TEACHER_TOKENS=2000000
DEMO ?= demo
BIN ?= build/bin
FORTUNES ?= /usr/share/games/fortunes
THREADS ?= $(shell nproc 2>/dev/null || echo 2)
SEED ?= 1
SEQ ?= 128
BATCH ?= 16
TEACHER_TOKENS ?= 1500000
TEACHER_LR ?= 2e-3
# distillation budget: stage 1 gets 10 %, stage 2 the other 90 % (the paper's split)
DISTILL_TOKENS ?= 1500000
STAGE1_TOKENS = $(shell echo $$(( $(DISTILL_TOKENS) / 10 )))
STAGE2_TOKENS = $(shell echo $$(( $(DISTILL_TOKENS) - $(DISTILL_TOKENS) / 10 )))
STAGE1_LR ?= 3e-2
STAGE2_LR ?= 1e-3
TRAIN_FLAGS = --batch $(BATCH) --seq-len $(SEQ) --threads $(THREADS) --seed $(SEED) --no-progress

.PHONY: demo demo-report
.DELETE_ON_ERROR:

EVALS = $(DEMO)/unigram.eval.json $(DEMO)/teacher.eval.json $(DEMO)/hedgehog-init.eval.json \
        $(DEMO)/hedgehog.eval.json $(DEMO)/hedgehog-ft.eval.json $(DEMO)/hedgemamba.eval.json \
        $(DEMO)/mapping.verify.json
# the student leaves the lab: a bundle, its checksums verified, text from it
PACKED = $(DEMO)/hedgemamba.bundle.verify.txt $(DEMO)/hedgemamba.samples.txt
GEN_FLAGS ?= --max-new-tokens 160 --temperature 0.7 --top-k 40 --threads $(THREADS)
PROMPTS ?= "Q: Why" "The best" "A man"

demo: $(EVALS) $(PACKED)
	@$(MAKE) --no-print-directory -f recipes/demo.mk demo-report DEMO=$(DEMO)

demo-report:
	@printf '\nmapping check (hm-verify mapping, tolerance 1e-5): %s\n' \
	    "$$(sed -n 's/.*"equivalent": \([a-z]*\).*"max_rel": \([0-9.e+-]*\), "where".*/equivalent \1, max rel error \2/p' $(DEMO)/mapping.verify.json)"
	@printf '\nheld-out perplexity (byte-level fortunes, %s targets, windows of %s):\n' \
	    "$$(sed -n 's/.*"targets": \([0-9]*\).*/\1/p' $(DEMO)/teacher.eval.json)" "$(SEQ)"
	@for m in "unigram:unigram (byte frequencies)" "teacher:teacher (GPT-NeoX, softmax attention)" \
	          "hedgehog-init:Hedgehog at identity init (no training)" \
	          "hedgehog:Hedgehog after stage 1 ($(STAGE1_TOKENS) tokens)" \
	          "hedgehog-ft:Hedgehog baseline (stage 1 + CE, $(DISTILL_TOKENS) tokens)" \
	          "hedgemamba:HedgeMamba (stage 1 + map + stage 2, $(DISTILL_TOKENS) tokens)"; do \
	    f=$${m%%:*}; printf '  %-62s %8.3f\n' "$${m#*:}" \
	        "$$(sed -n 's/.*"ppl": \([0-9.]*\).*/\1/p' $(DEMO)/$$f.eval.json)"; done
	@printf '\nthe HedgeMamba student packed: %s (%s)\n' "$(DEMO)/hedgemamba.bundle.tar.gz" \
	    "$$(cat $(DEMO)/hedgemamba.bundle.verify.txt)"
	@printf 'generated from the bundle (hm-generate $(GEN_FLAGS)):\n'
	@sed 's/^/  /' $(DEMO)/hedgemamba.samples.txt

$(FORTUNES):
	@echo "demo: the corpus comes from the Debian package 'fortunes';" >&2
	@if [ "$$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fortunes >/dev/null; \
	 else echo "demo: please run: sudo apt-get install fortunes" >&2; exit 1; fi

$(DEMO)/.dir:
	mkdir -p $(DEMO) && touch $@

$(DEMO)/fortunes.jsonl: recipes/fortunes2jsonl.awk | $(FORTUNES) $(DEMO)/.dir
	LC_ALL=C awk -f recipes/fortunes2jsonl.awk $$(ls $(FORTUNES)/* | grep -v '\.dat$$\|\.u8$$' | sort) > $@

$(DEMO)/train.tok: $(DEMO)/fortunes.jsonl $(BIN)/hm-tokenize
	$(BIN)/hm-tokenize --bytes $< -o $@ --val-fraction 0.05 --seed $(SEED) -f -q

$(DEMO)/train.val.tok: $(DEMO)/train.tok

# the floor a model must beat: byte frequencies of the training split
# (add-one smoothed), scored on the same held-out windows
$(DEMO)/unigram.eval.json: $(DEMO)/train.tok $(DEMO)/train.val.tok $(BIN)/hm-eval
	$(BIN)/hm-eval --unigram $(DEMO)/train.tok --data $(DEMO)/train.val.tok --seq-len $(SEQ) --json > $@

$(DEMO)/teacher-init.st: $(BIN)/hm-init | $(DEMO)/.dir
	$(BIN)/hm-init --preset tiny --seed $(SEED) -o $@ -f -q

$(DEMO)/teacher.st: $(DEMO)/teacher-init.st $(DEMO)/train.tok $(DEMO)/train.val.tok $(BIN)/hm-finetune
	$(BIN)/hm-finetune $< -o $@ -f --data $(DEMO)/train.tok --val-data $(DEMO)/train.val.tok \
	    --tokens $(TEACHER_TOKENS) --lr $(TEACHER_LR) --weight-decay 0.1 --val-every 100 \
	    --val-tokens 32768 --log $(DEMO)/teacher.log.jsonl $(TRAIN_FLAGS)

# stage 1: softmax attention -> Hedgehog linear attention (feature maps only)
$(DEMO)/hedgehog-init.st: $(DEMO)/teacher.st $(DEMO)/train.tok $(BIN)/hm-linearize
	$(BIN)/hm-linearize $< -o $@ -f --data $(DEMO)/train.tok --steps 0 -q $(TRAIN_FLAGS)

$(DEMO)/hedgehog.st: $(DEMO)/teacher.st $(DEMO)/train.tok $(DEMO)/train.val.tok $(BIN)/hm-linearize
	$(BIN)/hm-linearize $< -o $@ -f --data $(DEMO)/train.tok --tokens $(STAGE1_TOKENS) \
	    --lr $(STAGE1_LR) --log $(DEMO)/hedgehog.log.jsonl $(TRAIN_FLAGS)

# stage 2: exact mapping into the HedgeMamba mixer, proven, then cross-entropy
$(DEMO)/hedgemamba-init.st: $(DEMO)/hedgehog.st $(BIN)/hm-map-ssm
	$(BIN)/hm-map-ssm $< -o $@ -f -q

$(DEMO)/mapping.verify.json: $(DEMO)/hedgehog.st $(DEMO)/hedgemamba-init.st $(DEMO)/train.val.tok $(BIN)/hm-verify
	$(BIN)/hm-verify mapping $(DEMO)/hedgehog.st $(DEMO)/hedgemamba-init.st \
	    --data $(DEMO)/train.val.tok --seq-len $(SEQ) --max-windows 8 --json > $@

$(DEMO)/hedgemamba.st: $(DEMO)/hedgemamba-init.st $(DEMO)/mapping.verify.json $(DEMO)/train.tok $(BIN)/hm-finetune
	$(BIN)/hm-finetune $< -o $@ -f --data $(DEMO)/train.tok --tokens $(STAGE2_TOKENS) \
	    --lr $(STAGE2_LR) --log $(DEMO)/hedgemamba.log.jsonl $(TRAIN_FLAGS)

# the paper's Hedgehog baseline: stage 1, then cross-entropy on the same tokens
$(DEMO)/hedgehog-ft.st: $(DEMO)/hedgehog.st $(DEMO)/train.tok $(BIN)/hm-finetune
	$(BIN)/hm-finetune $< -o $@ -f --data $(DEMO)/train.tok --tokens $(STAGE2_TOKENS) \
	    --lr $(STAGE2_LR) --freeze embeddings --log $(DEMO)/hedgehog-ft.log.jsonl $(TRAIN_FLAGS)

$(DEMO)/%.eval.json: $(DEMO)/%.st $(DEMO)/train.val.tok $(BIN)/hm-eval
	$(BIN)/hm-eval $< --data $(DEMO)/train.val.tok --seq-len $(SEQ) --threads $(THREADS) --json > $@

# pack → verify → generate (the bundle carries its byte-level tokenizer)
$(DEMO)/hedgemamba.bundle.tar.gz: $(DEMO)/hedgemamba.st $(DEMO)/hedgemamba.eval.json $(BIN)/hm-pack
	$(BIN)/hm-pack $< -o $@ --bytes -f -q

$(DEMO)/hedgemamba.bundle.verify.txt: $(DEMO)/hedgemamba.bundle.tar.gz $(BIN)/hm-verify
	$(BIN)/hm-verify bundle $< > $@.tmp && mv $@.tmp $@

$(DEMO)/hedgemamba.samples.txt: $(DEMO)/hedgemamba.bundle.tar.gz $(DEMO)/hedgemamba.bundle.verify.txt $(BIN)/hm-generate
	@rm -f $@.tmp; seed=0; for p in $(PROMPTS); do seed=$$((seed + 1)); \
	    printf '%s' "$$p" >> $@.tmp; \
	    $(BIN)/hm-generate $< --prompt "$$p" --seed $$seed $(GEN_FLAGS) >> $@.tmp || exit 1; \
	    printf '\n---\n' >> $@.tmp; done; mv $@.tmp $@
