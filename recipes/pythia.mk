# pythia.mk — a real GPT-NeoX (Pythia) conversion with the paper's recipe:
#   make -f recipes/pythia.mk TEACHER=path/to/pythia-160m DATA=owt.tar.xz [OUT=DIR]
#   make -f recipes/pythia.mk TEACHER=path/to/pythia-160m plan
# Everything else (stages, variables, the plan) is recipes/convert.mk.
FAMILY = neox
include recipes/convert.mk
