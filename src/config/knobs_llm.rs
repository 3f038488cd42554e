//! Knobs of the LLM-inference workload (`workload.kind = "llm"`, src/workload/llm.rs): seed
//! 000's llama.cpp runs (mechanisms.md §6), the workload LUF was measured on.

use super::knobs::{float, int, knob, Kind, Knob};

pub static LLM_KNOBS: &[Knob] = &[
    knob!("workload.llm.processes", int(1, 4096), "3", "", "LLM: inference processes, each with its own model file (seed 000 ran three llama.cpp at once).", "seed 000: three `llama.cpp/main -m <70G model>` in parallel"),
    knob!("workload.llm.threads", int(1, 4096), "15", "", "LLM: threads per process; each matrix's rows are split among them (llama.cpp -t).", "seed 000: -t 15"),
    knob!("workload.llm.model_mib", int(1, 1 << 30), "71680", "MiB", "LLM: size of each model file, mapped read-only (page cache, read from the device on a miss). The weights are streamed once per evaluation.", "seed 000: 70 GB models"),
    knob!("workload.llm.layers", int(1, 4096), "80", "", "LLM: transformer layers; the weights are split evenly among them, and each layer into its 7 matrices (q, k, v, o, gate, up, down) by the Llama 2 70B shapes.", "Touvron et al. 2023, Llama 2, Table 1 / model card: 70B has 80 layers, d=8192, ffn 28672, 8 KV heads (GQA)"),
    knob!("workload.llm.prompt_tokens", int(1, 1 << 20), "5", "", "LLM: prompt tokens, evaluated together in one pass over the weights (BOS + the prompt's tokens: 'who are you?' is 4 Llama 2 tokens).", "seed 000: -p \"who are you?\", 'total time = ... / 24 tokens' = 5 prompt + 19 evaluated; llama.cpp examples/main/main.cpp"),
    knob!("workload.llm.gen_tokens", int(0, 1 << 20), "19", "", "LLM: generated tokens that are evaluated, one pass over the weights each (llama.cpp -n N evaluates N - 1: the last sampled token is never decoded).", "seed 000: -n 20; llama.cpp examples/main/main.cpp's loop"),
    knob!("workload.llm.text_pages", int(1, 1 << 20), "64", "pages", "LLM: hot instruction footprint of the inference loop (ggml kernels and graph code); the matmul kernel is fetched with every weight page, the rest once per matrix. Chosen (the seed gives no text size): see docs/llm.md.", "chosen; docs/llm.md"),
    knob!("workload.llm.barrier", Kind::Bool, "true", "", "LLM: a process's threads meet after each matrix, spinning while they wait (ggml_barrier(): busy-wait on an atomic counter with ggml_thread_cpu_relax(), no sleep), so their CPUs stay in the mm while a thread waits for a read. false: threads run on independently.", "ggml/src/ggml-cpu/ggml-cpu.c ggml_barrier() (llama.cpp); a barrier after every graph node"),
    knob!("workload.llm.ns_per_weight_page", float(0.0, 1e9), "400", "ns", "LLM: user time to process 4 KiB of weights (q8_0 dot products, memory bound). Chosen as 4096 B at ~10 GB/s per core, the streaming rate of cost.copy_page_bytes_per_ns's source; see docs/llm.md for the sensitivity.", "chosen; docs/llm.md"),
];
