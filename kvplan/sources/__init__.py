"""Everything read from outside kvplan: YAML specs, config.json, the Hugging Face Hub, the model
library, safetensors weights and the GPU catalog. The only code that looks at raw dicts or files."""
