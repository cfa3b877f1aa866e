"""What several engines use, named for what it is; no engine's own rules.

- `device`       device facts every engine meets: the CUDA context, lazily loaded kernels,
                 NCCL communicator buffers, a GPU's compute capability
- `weights`      weight formats and the weight bytes on each GPU of each pipeline stage
- `activations`  one forward pass's transient buffers (dense MLP, fused MoE) per token
- `loading`      a weight load replayed through PyTorch's caching allocator, with the rotary
                 caches the model builds while loading (vLLM and SGLang create parameters alike)
- `budget`       the budget record every engine fills and the "no memory left" check
- `releases`     the row of an engine's release table (its behaviour switches) a version has

The engines sit above this package (`vllm | sglang | llamacpp | trtllm | hf | tgi > base >
shared`, held by import-linter); nothing here imports an engine.
"""
