# stories_common.mk — what recipes/stories260k.mk and recipes/ablations.mk
# share: the really pretrained teacher (llama2.c stories260K, imported
# exactly), a distillation corpus sampled from the teacher itself (its
# training corpus is not at hand), held-out text from other seeds, the
# TinyStories sample, a multiple-choice set from held-out stories, and the
# evaluation rules. Include it after setting OUT.
#
# The corpus: CORPUS_SAMPLES stories sampled at temperature 1 (no top-k/p:
# the teacher's own distribution) from BOS, seeds 1.., each framed by BOS as
# llama2.c's token files are; SHARDS processes of one thread each. Held-out:
# HELD_SAMPLES stories from seeds 1000001.. (never in the corpus).
BIN ?= build/bin
THREADS ?= 2
SHARED ?= ../shared/data
TEACHER_BIN ?= $(SHARED)/llama2c_stories260K.bin
TOKENIZER ?= $(SHARED)/llama2c_tok512.bin
TINYSTORIES ?= $(SHARED)/cs336_tinystories_sample.txt
CORPUS_SAMPLES ?= 3000
HELD_SAMPLES ?= 240
STORY_TOKENS ?= 400
SHARDS ?= 2
SEQ ?= 256
BATCH ?= 16
GEN = --tokenizer $(TOKENIZER) --max-new-tokens $(STORY_TOKENS)
# the corpus's sampling temperature (the held-out stories are sampled at 1)
CORPUS_TEMP ?= 1
EVAL_FLAGS = --seq-len $(SEQ) --threads $(THREADS)
# generation quality against the teacher (hm-eval --teacher, SPEC §11): GEN_PROMPTS
# prompts of GEN_PROMPT_LEN held-out tokens, GEN_NEW sampled at temperature 1, seed GEN_SEED
GEN_PROMPTS ?= 32
GEN_PROMPT_LEN ?= 32
GEN_NEW ?= 128
GEN_SEED ?= 1

.DELETE_ON_ERROR:
.PHONY: FORCE
FORCE:

# $(call CMD_FILE,BASE,COMMAND): BASE.cmd holds COMMAND (no single quotes),
# rewritten only when it changes; a run that depends on BASE.cmd reruns when
# its command line does (a variable changed), and only then.
define CMD_FILE
$(1).cmd: FORCE | $(dir $(1)).dir
	@printf '%s\n' '$(2)' | cmp -s - $$@ || printf '%s\n' '$(2)' > $$@
endef

$(OUT)/.dir:
	mkdir -p $(OUT) && touch $@

$(OUT)/teacher.st: $(TEACHER_BIN) $(BIN)/hm-import | $(OUT)/.dir
	$(BIN)/hm-import llama2c $< -o $@ -f

# seeds 1 .. CORPUS_SAMPLES, split into SHARDS runs side by side (the same
# stories whatever SHARDS is); corpus.cmd reruns it when CORPUS_TEMP,
# CORPUS_SAMPLES or the generation flags change (recorded without OUT: a
# copied or moved OUT keeps its corpus)
CORPUS_GEN = $(BIN)/hm-generate $(OUT)/teacher.st $(GEN) --temperature $(CORPUS_TEMP) --ids --threads 1
$(eval $(call CMD_FILE,$(OUT)/corpus,$(subst $(OUT)/,,$(CORPUS_GEN)) --samples $(CORPUS_SAMPLES)))
$(OUT)/corpus.ids: $(OUT)/corpus.cmd $(OUT)/teacher.st $(BIN)/hm-generate
	@per=$$(( ($(CORPUS_SAMPLES) + $(SHARDS) - 1) / $(SHARDS) )); pids=; \
	for k in $$(seq 0 $$(( $(SHARDS) - 1 ))); do \
	    n=$$(( $(CORPUS_SAMPLES) - k * per )); [ $$n -gt $$per ] && n=$$per; [ $$n -gt 0 ] || continue; \
	    cmd="$(CORPUS_GEN) --samples $$n --seed $$(( 1 + k * per ))"; echo "$$cmd > $@.$$k"; \
	    $$cmd > $@.$$k & \
	    pids="$$pids $$!"; done; \
	for p in $$pids; do wait $$p || exit 1; done; \
	cat $$(for k in $$(seq 0 $$(( $(SHARDS) - 1 ))); do [ -f $@.$$k ] && echo $@.$$k; done) > $@.tmp && \
	rm -f $@.[0-9]* && mv $@.tmp $@

# BOS before each story: the llama2.c framing
$(OUT)/corpus.tok: $(OUT)/corpus.ids $(BIN)/hm-tokenize
	awk '{ print "1 " $$0 }' $< > $@.framed
	$(BIN)/hm-tokenize --ids-in --tokenizer $(TOKENIZER) $@.framed -o $@ -f -q
	rm -f $@.framed

$(OUT)/held.jsonl: $(OUT)/teacher.st $(BIN)/hm-generate
	$(BIN)/hm-generate $< $(GEN) --temperature 1 --samples $(HELD_SAMPLES) --seed 1000001 --json \
	    --threads $(THREADS) > $@

$(OUT)/held.tok: $(OUT)/held.jsonl $(BIN)/hm-tokenize
	sed -e 's/.*"new_ids": \[\([^]]*\)\].*/1, \1/' -e 's/, *$$//' $< > $@.ids
	$(BIN)/hm-tokenize --ids-in --tokenizer $(TOKENIZER) $@.ids -o $@ -f -q
	rm -f $@.ids

$(OUT)/tinystories.tok: $(TINYSTORIES) $(BIN)/hm-tokenize | $(OUT)/.dir
	$(BIN)/hm-tokenize --tokenizer $(TOKENIZER) $< -o $@ -f -q

$(OUT)/mc.jsonl: $(OUT)/held.jsonl recipes/stories_mc.awk
	awk -v NCHOICES=4 -f recipes/stories_mc.awk $< > $@

# evaluations of any model M.st: held-out generated text, the TinyStories
# sample (windows of 128: it holds 1.9k tokens), the multiple choice
$(OUT)/%.held.json: $(OUT)/%.st $(OUT)/held.tok $(BIN)/hm-eval
	$(BIN)/hm-eval $< --data $(OUT)/held.tok $(EVAL_FLAGS) --json -q > $@

$(OUT)/%.ts.json: $(OUT)/%.st $(OUT)/tinystories.tok $(BIN)/hm-eval
	$(BIN)/hm-eval $< --data $(OUT)/tinystories.tok --seq-len 128 --threads $(THREADS) --json -q > $@

$(OUT)/%.gen.json: $(OUT)/%.st $(OUT)/teacher.st $(OUT)/held.tok $(BIN)/hm-eval
	$(BIN)/hm-eval $< --data $(OUT)/held.tok $(EVAL_FLAGS) --teacher $(OUT)/teacher.st \
	    --prompts $(GEN_PROMPTS) --prompt-len $(GEN_PROMPT_LEN) --new-tokens $(GEN_NEW) \
	    --seed $(GEN_SEED) --json -q > $@

$(OUT)/%.mc.json: $(OUT)/%.st $(OUT)/mc.jsonl $(BIN)/hm-eval
	$(BIN)/hm-eval $< --mc $(OUT)/mc.jsonl --tokenizer $(TOKENIZER) --threads $(THREADS) --json -q > $@
