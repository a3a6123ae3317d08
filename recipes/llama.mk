# llama.mk — a real Llama conversion (LlamaForCausalLM folders: TinyLlama,
# SmolLM, Llama 3.2, ...) with the paper's recipe:
#   make -f recipes/llama.mk TEACHER=path/to/TinyLlama-1.1B DATA=corpus.jsonl [OUT=DIR]
#   make -f recipes/llama.mk TEACHER=path/to/TinyLlama-1.1B plan
# Everything else (stages, variables, the plan) is recipes/convert.mk.
FAMILY = llama
include recipes/convert.mk
