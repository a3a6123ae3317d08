# ablations.mk — the paper's tables rerun at demo scale on the stories260K
# teacher and its self-generated corpus (recipes/stories_common.mk), every
# cell a real run for each of SEEDS, the paper's numbers beside ours.
#
#   make -f recipes/ablations.mk OUT=DIR [BIN=build/bin] [THREADS=N] [AB_BUDGET=N] [SEEDS="1 2"]
#
# The recipe is recipes/stories260k.mk's: the "stage 1" share S1 of a
# HedgeMamba cell is the bridge (hm-map-ssm from the teacher with each
# head's decay from its attention when ssm is active, then stage 1b,
# hm-finetune --align, on S1 % of the budget); stage 2 (S2 %) is pure
# distillation (STAGE2_OBJ) for every student.
#   Table 1  teacher, Hedgehog (stage 1 + stage 2), HedgeMamba, naive
#   Table 2  components: Hedgehog -> +SSM -> +Conv -> +Gate (hm-map-ssm
#            --components none | ssm | ssm,conv | ssm,conv,gate: one code path)
#   Table 3  bridge/stage-2 splits 100/0, 50/50, SPLIT/(100-SPLIT), 10/90, 0/100
#   Table 4  total budgets x1, x2, x4 (split SPLIT), and skip stage 1 (0/100)
#            at the same budgets
# Outputs: DIR/ablations.json, DIR/ablations.md, DIR/plots/*.png (gnuplot,
# from the JSON-lines logs), every run under DIR/ab/.
#
# Real file dependencies: run names carry their token counts, components
# and seed; each run's full command line is kept in NAME.cmd, rewritten only
# when it changes, and the run depends on it, so a second make does nothing
# and changing a variable (a learning rate, BATCH, ...) reruns only the runs
# whose command it changes, and what depends on them.
OUT ?= out/ablations
AB_BUDGET ?= 200000
SEEDS ?= 1 2
# the recipe's bridge share (recipes/stories260k.mk BRIDGE_PCT)
SPLIT ?= 50
STAGE1_LR ?= 1e-2
ALIGN_LR ?= 1e-2
STAGE2_LR ?= 3e-3
STAGE2_OBJ ?= --kd-teacher $(OUT)/teacher.st --kd-weight 1 --ce-weight 0
DECAY ?= --decay-from $(OUT)/corpus.tok --seq-len $(SEQ)
.DEFAULT_GOAL := all
include recipes/stories_common.mk

AB := $(OUT)/ab
pct = $(shell echo $$(( $(AB_BUDGET) * $(1) / 100 )))
TRAIN = --data $(OUT)/corpus.tok --batch $(BATCH) --seq-len $(SEQ) --threads $(THREADS) \
        --no-progress -q
CE = $(TRAIN) --lr $(STAGE2_LR) --warmup 20 --freeze embeddings $(STAGE2_OBJ)
REST := $(shell echo $$(( 100 - $(SPLIT) )))
S_R := $(SPLIT)-$(REST)
S_R2 := $(shell echo $$(( 2 * $(SPLIT) )))-$(shell echo $$(( 2 * $(REST) )))
S_R4 := $(shell echo $$(( 4 * $(SPLIT) )))-$(shell echo $$(( 4 * $(REST) )))
# every split/budget cell of the full mixer, each once (SPLIT may be 10 or 50)
HM_SPLITS := $(sort $(S_R) 100-0 50-50 10-90 0-100 $(S_R2) $(S_R4) 0-200 0-400)

.PHONY: all
all: $(OUT)/ablations.md $(OUT)/plots/.done

$(AB)/.dir:
	mkdir -p $(AB) && touch $@

# stage 1 (the Hedgehog baseline): s1-TOKENS-sSEED
define STAGE1
$(eval c := $(BIN)/hm-linearize $(OUT)/teacher.st -o $(AB)/s1-$(1)-s$(2).st -f $(TRAIN) --seed $(2) --tokens $(1) --lr $(STAGE1_LR) --log $(AB)/s1-$(1)-s$(2).log.jsonl)
$(call CMD_FILE,$(AB)/s1-$(1)-s$(2),$(c))
$(AB)/s1-$(1)-s$(2).st: $(AB)/s1-$(1)-s$(2).cmd $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-linearize
	$(c)
endef

# map: NAME-init from INPUT with COMPONENTS [INIT flags]
define MAP
$(eval c := $(BIN)/hm-map-ssm $(2) -o $(AB)/$(1).st -f -q --components $(3) $(4))
$(call CMD_FILE,$(AB)/$(1),$(c))
$(AB)/$(1).st: $(AB)/$(1).cmd $(2) $(OUT)/corpus.tok $(BIN)/hm-map-ssm
	$(c)
endef

# stage 1b (the bridge): NAME from INPUT on TOKENS with SEED
define ALIGN
$(eval c := $(BIN)/hm-finetune $(2) -o $(AB)/$(1).st -f $(TRAIN) --seed $(4) --tokens $(3) --align $(OUT)/teacher.st --align-loss mse --lr $(ALIGN_LR) --warmup 5 --log $(AB)/$(1).log.jsonl)
$(call CMD_FILE,$(AB)/$(1),$(c))
$(AB)/$(1).st: $(AB)/$(1).cmd $(2) $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(c)
endef

# stage 2 / cross-entropy: NAME from INPUT on TOKENS with SEED
define FT
$(eval c := $(BIN)/hm-finetune $(2) -o $(AB)/$(1).st -f $(CE) --seed $(4) --tokens $(3) --log $(AB)/$(1).log.jsonl)
$(call CMD_FILE,$(AB)/$(1),$(c))
$(AB)/$(1).st: $(AB)/$(1).cmd $(2) $(OUT)/teacher.st $(OUT)/corpus.tok $(BIN)/hm-finetune
	$(c)
endef

# one HedgeMamba of split S1/S2 (percent of AB_BUDGET) and COMPONENTS, seed:
# map-COMPS (shared; the decay from the teacher when ssm is active), the
# bridge hm-S1-S2-COMPS-sSEED-init (S1 = 0: the mapping itself), stage 2
# hm-S1-S2-COMPS-sSEED (S2 = 0: the bridge's output)
define HM_RUN
$(call ONCE,map-$(3),$(call MAP,map-$(3),$(OUT)/teacher.st,$(subst +,$(comma),$(3)),$(if $(findstring ssm,$(3)),$(DECAY))))
$(if $(filter-out 0,$(1)),$(eval $(call ALIGN,hm-$(1)-$(2)-$(3)-s$(4)-init,$(AB)/map-$(3).st,$(call pct,$(1)),$(4))),$(eval $(AB)/hm-$(1)-$(2)-$(3)-s$(4)-init.st: $(AB)/map-$(3).st ; cp $$< $$@))
$(if $(filter-out 0,$(2)),$(eval $(call FT,hm-$(1)-$(2)-$(3)-s$(4),$(AB)/hm-$(1)-$(2)-$(3)-s$(4)-init.st,$(call pct,$(2)),$(4))),$(eval $(AB)/hm-$(1)-$(2)-$(3)-s$(4).st: $(AB)/hm-$(1)-$(2)-$(3)-s$(4)-init.st ; cp $$< $$@))
endef

# $(call ONCE,KEY,RULES): eval RULES the first time KEY is seen (stage-1
# runs are shared between cells)
ONCE = $(if $(filter $(1),$(ONCE_SEEN)),,$(eval ONCE_SEEN += $(1))$(eval $(2)))
comma := ,
ALL := ssm+conv+gate

# the cells: name → run, per seed
define SEED_RUNS
$(foreach sp,$(HM_SPLITS),$(eval $(call HM_RUN,$(word 1,$(subst -, ,$(sp))),$(word 2,$(subst -, ,$(sp))),$(ALL),$(1))))
$(eval $(call HM_RUN,$(SPLIT),$(REST),none,$(1)))
$(eval $(call HM_RUN,$(SPLIT),$(REST),ssm,$(1)))
$(eval $(call HM_RUN,$(SPLIT),$(REST),ssm+conv,$(1)))
$(eval $(call STAGE1,$(call pct,10),$(1)))
$(eval $(call FT,hedgehog-s$(1),$(AB)/s1-$(call pct,10)-s$(1).st,$(call pct,90),$(1)))
$(eval $(call MAP,naive-s$(1)-init,$(OUT)/teacher.st,$(subst +,$(comma),$(ALL)),--init random --seed $(1)))
$(eval $(call FT,naive-s$(1),$(AB)/naive-s$(1)-init.st,$(call pct,100),$(1)))
endef
$(foreach s,$(SEEDS),$(eval $(call SEED_RUNS,$(s))))

# cell name → run base (without -sSEED)
CELLS := hedgehog:hedgehog naive:naive hedgemamba:hm-$(S_R)-$(ALL) \
         c-hedgehog:hm-$(S_R)-none c-ssm:hm-$(S_R)-ssm c-conv:hm-$(S_R)-ssm+conv \
         c-gate:hm-$(S_R)-$(ALL) split-100-0:hm-100-0-$(ALL) split-50-50:hm-50-50-$(ALL) \
         split-recipe:hm-$(S_R)-$(ALL) split-10-90:hm-10-90-$(ALL) split-0-100:hm-0-100-$(ALL) \
         budget-1:hm-$(S_R)-$(ALL) budget-2:hm-$(S_R2)-$(ALL) budget-4:hm-$(S_R4)-$(ALL) \
         skip-1:hm-0-100-$(ALL) skip-2:hm-0-200-$(ALL) skip-4:hm-0-400-$(ALL)
RUN_BASES := $(sort $(foreach c,$(CELLS),$(word 2,$(subst :, ,$(c)))))
HELD := $(OUT)/teacher.held.json $(foreach b,$(RUN_BASES),$(foreach s,$(SEEDS),$(AB)/$(b)-s$(s).held.json))

$(OUT)/ablations.json: $(HELD) recipes/ablations_results.sh
	OUT=$(OUT) SEEDS="$(SEEDS)" CELLS="$(CELLS)" AB_BUDGET=$(AB_BUDGET) SPLIT=$(SPLIT) \
	    sh recipes/ablations_results.sh json > $@.tmp && mv $@.tmp $@

$(OUT)/ablations.md: $(OUT)/ablations.json recipes/ablations_results.sh
	OUT=$(OUT) SEEDS="$(SEEDS)" CELLS="$(CELLS)" AB_BUDGET=$(AB_BUDGET) SPLIT=$(SPLIT) \
	    sh recipes/ablations_results.sh md > $@.tmp && mv $@.tmp $@
	@cat $@

$(OUT)/plots/.done: $(OUT)/ablations.json recipes/ablations_plots.sh
	OUT=$(OUT) SEEDS="$(SEEDS)" AB_BUDGET=$(AB_BUDGET) ALL=$(ALL) SPLIT=$(SPLIT) sh recipes/ablations_plots.sh && touch $@
