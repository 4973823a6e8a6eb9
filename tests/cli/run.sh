#!/usr/bin/env bash
# End-to-end tests of the sizing verbs of the real `gpuhub` binary: size, fit, guide, catalog,
# models. Checks exit codes (0 ok, 2 bad input with exactly one line on stderr), the figures of
# spec/sizing.md §5-§6 in the JSON output (parsed with python3), and the human tables.
#   bash tests/cli/run.sh BUILD_DIR
set -uo pipefail
build_dir=$(cd "${1:-build}" && pwd)
bin="$build_dir/gpuhub"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
export GPUHUB_DATA_DIR="$top/data"
[ -x "$bin" ] || { echo "cli: $bin is not built"; exit 1; }

work=$(mktemp -d /tmp/gpuhub-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
out="$work/out" err="$work/err"
passed=0 failed=0

fail() {
  echo "FAIL: $1"
  echo "  command: gpuhub ${*:2}"
  echo "  stdout: $(head -c 600 "$out")"
  echo "  stderr: $(head -c 600 "$err")"
  failed=$((failed + 1))
}

# expect_ok DESCRIPTION PYTHON_CHECK ARGS...  (exit 0, empty stderr; PYTHON_CHECK evaluated with
# `j` = parsed stdout when it is JSON and `t` = stdout text; empty check = none)
expect_ok() {
  local what=$1 check=$2
  shift 2
  "$bin" "$@" >"$out" 2>"$err"
  local rc=$?
  if [ $rc -ne 0 ] || [ -s "$err" ]; then
    fail "$what (exit $rc, want 0 and a quiet stderr)" "$@"
    return
  fi
  if [ -n "$check" ]; then
    if ! python3 - "$out" "$check" <<'EOF'
import json, sys
t = open(sys.argv[1]).read()
try:
    j = json.loads(t)
except ValueError:
    j = None
ok = eval(sys.argv[2])
if not ok:
    sys.exit(1)
EOF
    then
      fail "$what (check failed: $check)" "$@"
      return
    fi
  fi
  passed=$((passed + 1))
}

# expect_bad DESCRIPTION EXPECTED_SUBSTRING ARGS...  (exit 2, one line on stderr naming the problem)
expect_bad() {
  local what=$1 expected=$2
  shift 2
  "$bin" "$@" >"$out" 2>"$err"
  local rc=$?
  local lines
  lines=$(wc -l <"$err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q "^gpuhub: " "$err" ||
      ! grep -qF -- "$expected" "$err"; then
    fail "$what (exit $rc with $lines stderr lines; want exit 2 and one line containing '$expected')" "$@"
    return
  fi
  passed=$((passed + 1))
}

near() { python3 -c "import sys; sys.exit(0 if abs($1 - $2) <= ${3:-0.005} else 1)"; }

# --- size ---------------------------------------------------------------------------------------
expect_ok "size 70b fp8 (spec §1: 74.7 GB)" \
  "abs(j['total_gb'] - 74.684355) < 1e-6 and [c['name'] for c in j['components']] == ['weights', 'kv_cache', 'runtime_overhead'] and j['components'][1]['bytes'] == 2*80*8*128*2*8192" \
  size --model 70b --workload infer --precision fp8 --json
expect_ok "size 7b bf16 is 17 GB" "abs(j['total_gb'] - 17.073742) < 1e-6" \
  size --model 7b --workload infer --json
expect_ok "size 70b fp8 at 128k: the cache alone is 42.9 GB" \
  "abs(j['components'][1]['gb'] - 42.949673) < 1e-6" \
  size --model 70b --workload infer --precision fp8 --context 131072 --json
expect_ok "size 7b full fine-tune: 112 GB + 15% = 128.8 GB" "abs(j['total_gb'] - 128.8) < 1e-9" \
  size --model 7b --workload full --json
expect_ok "size 13b full, ZeRO-3 over 4 GPUs: 59.8 GB each" \
  "abs(j['per_gpu_gb'] - 59.8) < 1e-9 and j['gpus'] == 4" \
  size --model 13b --workload full --gpus 4 --zero 3 --json
expect_ok "size --explain prints formulas" "'70e9 params x 1.0 B/param (fp8) = 70.00 GB' in t and 'total: 74.68 GB' in t" \
  size --model 70b --workload infer --precision fp8 --explain
expect_ok "size a bundled model id" "j['model']['total_params'] == 8030261248" \
  size --model meta-llama/Llama-3.1-8B --workload infer --json
expect_ok "size a real model: the CUDA context is beside the framework's peak, the card holds both" \
  "j['outside_allocator']['name'] == 'cuda_context' and abs(j['card_gb'] - j['per_gpu_gb'] - 0.5) < 1e-9 and abs(sum(c['bytes'] for c in j['components']) - j['total_bytes']) < 1" \
  size --model meta-llama/Llama-3.1-8B --workload infer --json
expect_ok "a preset has nothing outside its components (runtime_overhead is one)" \
  "j['outside_allocator'] is None and j['card_gb'] == j['per_gpu_gb']" \
  size --model 7b --workload infer --json
expect_ok "size a config.json path" "j['model']['total_params'] == 8030261248" \
  size --model "$top/data/models/meta-llama--Llama-3.1-8B.json" --workload infer --json
expect_ok "size qlora rank 64" "j['workload']['rank'] == 64" \
  size --model 70b --workload qlora --rank 64 --json
expect_ok "size --grad-accum 8: the gradients stay allocated (2 B x 8.03e9 in bf16)" \
  "j['workload']['grad_accum'] == 8 and abs([c for c in j['components'] if c['name'] == 'gradients'][0]['bytes'] - 2 * 8030261248) < 1" \
  size --model meta-llama/Llama-3.1-8B --workload full --pure-bf16 --grad-accum 8 --json
expect_ok "size --prefill-chunk: a serving engine's chunk caps the prefill working set" \
  "j['workload']['prefill_chunk'] == 8192 and [c for c in j['components'] if c['name'] == 'prefill_activations'][0]['formula'].startswith('8192 prompt tokens per prefill chunk')" \
  size --model meta-llama/Llama-3.1-8B --workload infer --context 131072 --prefill-chunk 8192 --json

expect_ok "size --old-transformers: Qwen2-0.5B's 30,720-token prompt upcasts every logit (x 151,936 x 6 B)" \
  "j['workload']['old_transformers'] and [c for c in j['components'] if c['name'] == 'prefill_activations'][0]['bytes'] == 30720 * 151936 * 6 and any(c['name'] == 'rotary_caches' for c in j['components'])" \
  size --model Qwen/Qwen2.5-0.5B --workload infer --context 32768 --prefill-chunk 30720 --old-transformers --json
expect_ok "size QLoRA with FSDP CPU offload: the nf4 base lives in host memory" \
  "j['workload']['offload_params'] and [c for c in j['components'] if c['name'] == 'base_weights'][0]['bytes'] == 0 and j['host_gb'] > 3" \
  size --model meta-llama/Llama-2-7b-hf --workload qlora --gpus 2 --zero 3 --offload-params --json
expect_ok "size --optimizer-in-backward: only the lm_head's gradient is alive (128,256 x 3,072 x 2 B)" \
  "j['workload']['optimizer_in_backward'] and [c for c in j['components'] if c['name'] == 'gradients'][0]['bytes'] == 128256 * 3072 * 2" \
  size --model meta-llama/Llama-3.2-3B --workload full --pure-bf16 --optimizer-in-backward --json
expect_ok "size --lora-targets mlp: r x (in + out) on gate, up and down" \
  "j['workload']['lora_targets'] == 'mlp'" \
  size --model meta-llama/Llama-3.2-3B --workload lora --lora-targets mlp --json
expect_ok "size --unchunked-nf4-quantization: torchao 0.1's quantization keeps 110 B x 45,088,768 reserved beside the weights" \
  "j['workload']['unchunked_nf4_quantization'] and abs(j['per_gpu_gb'] - 8.83) < 0.01 and 'torchao before 0.2' in [c for c in j['components'] if c['name'] == 'allocator_reserve'][0]['formula']" \
  size --model meta-llama/Llama-2-7b-hf --workload qlora --seq 512 --batch 2 --rank 8 --lora-targets all-linear --pure-bf16 --unchunked-nf4-quantization --json
expect_ok "size --foreach-adamw: torch.optim.AdamW's foreach step copies the sharded state (3.37 GB for Llama-2-7B on 4 GPUs, 1.53 GB beyond the freed activations)" \
  "j['workload']['foreach_adamw'] and abs(j['per_gpu_gb'] - 17.02) < 0.01 and abs([c for c in j['components'] if c['name'] == 'optimizer_step_temporaries'][0]['bytes'] - 1.53e9) < 0.01e9" \
  size --model meta-llama/Llama-2-7b-hf --workload full --seq 512 --batch 2 --gpus 4 --zero 3 --pure-bf16 --old-transformers --foreach-adamw --json
expect_bad "--unchunked-nf4-quantization is for QLoRA" \
  "--unchunked-nf4-quantization applies to QLoRA, not LoRA" \
  size --model meta-llama/Llama-2-7b-hf --workload lora --unchunked-nf4-quantization
expect_bad "--foreach-adamw is AdamW's step, not SGD's" \
  "--foreach-adamw is torch.optim.AdamW's step; it does not apply to --optimizer sgd" \
  size --model meta-llama/Llama-3.2-3B --workload lora --optimizer sgd --foreach-adamw
expect_bad "--optimizer-in-backward is for full fine-tuning" \
  "--optimizer-in-backward applies to full fine-tuning, not LoRA" \
  size --model meta-llama/Llama-3.2-3B --workload lora --optimizer-in-backward
expect_bad "--offload-params needs FSDP" "parameter offload needs training with ZeRO stage 3 / FSDP (--zero 3)" \
  size --model meta-llama/Llama-2-7b-hf --workload lora --gpus 2 --offload-params

# --- fit: the worked examples of spec §6 --------------------------------------------------------
expect_ok "fit 7b bf16 -> one RTX A5000, \$190/month" \
  "j['best']['gpu'] == 'RTX A5000' and j['best']['count'] == 1 and j['best']['monthly_usd'] == 190 and abs(j['required_gb'] - 17.07) < 0.005 and j['best']['tight'] is False" \
  fit --model 7b --workload infer --precision bf16 --json
expect_ok "fit 70b fp8 -> one H100 PCIe, \$1,490" \
  "j['best']['gpu'] == 'H100 PCIe' and j['best']['count'] == 1 and j['best']['monthly_usd'] == 1490 and abs(j['required_gb'] - 74.68) < 0.005 and j['best']['decode_ceiling_tok_s'] == 28.57" \
  fit --model 70b --workload infer --precision fp8 --json
expect_ok "fit 13b full -> 4x A100 SXM, \$3,643.20/month" \
  "j['best']['gpu'] == 'A100 SXM' and j['best']['count'] == 4 and j['best']['monthly_usd'] == 3643.2 and j['best']['exact']['monthly_usd'] == '3643.200000' and abs(j['required_gb'] - 239.2) < 1e-9 and abs(j['best']['headroom_gb_per_card'] - 20.2) < 1e-9 and j['best']['decode_ceiling_tok_s'] is None" \
  fit --model 13b --workload full --json
expect_ok "fit lists runners-up cheapest first" \
  "[a['configuration'] for a in j['alternatives']] == ['RTX 3090', 'A40', 'L4', 'RTX A6000'] and all(j['alternatives'][i]['monthly_usd'] <= j['alternatives'][i+1]['monthly_usd'] for i in range(3))" \
  fit --model 7b --workload infer --json
expect_ok "fit --top 2" "len(j['alternatives']) == 1" fit --model 7b --workload infer --top 2 --json
expect_ok "fit --in-stock skips the H100 PCIe (none free)" "j['best']['gpu'] == 'MI300X'" \
  fit --model 70b --workload infer --precision fp8 --in-stock --json
expect_ok "fit --cuda-only --region IAD-1 for 7b full -> H200 SXM" "j['best']['gpu'] == 'H200 SXM'" \
  fit --model 7b --workload full --cuda-only --region IAD-1 --json
expect_ok "fit --gpu picks one card" "j['best']['configuration'] == '4x H100 SXM' and j['best']['monthly_usd'] == 6219.2" \
  fit --model 13b --workload full --gpu "H100 SXM" --json
expect_ok "fit --max-monthly-usd: sets come in when single cards are over budget" \
  "j['best']['configuration'] == '2x RTX 6000 Ada' and j['best']['monthly_usd'] == 874" \
  fit --model 70b --workload infer --precision fp8 --max-monthly-usd 1000 --json
expect_ok "fit: nothing fits is an answer (best null, reason)" \
  "j['best'] is None and j['reason'].startswith('no configuration holds this job') and j['alternatives'] == []" \
  fit --model 405b --workload full --json
expect_ok "fit --why-not explains every exclusion" \
  "any(x['configuration'] == 'A100 SXM' and x['kind'] == 'needs_fp8' for x in j['excluded'])" \
  fit --model 70b --workload infer --precision fp8 --why-not --json
expect_ok "fit text table" "'Best: 4x A100 SXM at \$3,643.20/month (8% multi-card discount)' in t and 'How the best answer was computed' in t" \
  fit --model 13b --workload full --explain
expect_ok "fit text --why-not" "'Excluded:' in t and 'FP8 weights need an FP8 card; A100 SXM has no FP8' in t" \
  fit --model 70b --workload infer --precision fp8 --why-not
expect_ok "fit nothing-fits text" "t.count('Nothing fits: ') == 1" fit --model 405b --workload full

# --- guide, catalog, models ---------------------------------------------------------------------
expect_ok "guide --json: tables and cheapest cells" \
  "set(['kv_cache', 'inference', 'training', 'cheapest', 'cost']) <= set(j) and j['cheapest']['70b']['fp8']['gpu'] == 'H100 PCIe' and j['cheapest']['70b']['fp8']['monthly_usd'] == 1490 and abs(j['kv_cache']['70b']['128k'] - 42.949673) < 1e-6 and abs(j['inference']['70b']['fp8'] - 74.684355) < 1e-6 and j['training']['7b']['full'] == 112 and abs(j['training']['7b']['full_with_allowance'] - 128.8) < 1e-9 and j['cheapest']['13b']['full']['configuration'] == '4x A100 SXM' and j['cheapest']['7b']['bf16']['gpu'] == 'RTX A5000' and len(j['cost']) == 15" \
  guide --json
expect_ok "guide tables" "'KV cache' in t and 'Cheapest configuration' in t and 'Cost per GB' in t" guide
expect_ok "guide: LoRA/QLoRA carry their activations; the published figure beside with its reason" \
  "abs(j['training']['7b']['lora'] - 18.415865) < 1e-6 and abs(j['training']['7b']['lora_activations'] - 1.855865) < 1e-6 and j['training']['7b']['lora_published']['gb'] == 21 and 'matches the published figure within its rounding' in j['training']['7b']['lora_published']['reason'] and j['training']['70b']['qlora_published']['gb'] == 51 and j['cheapest']['34b']['qlora']['gpu'] == 'A40' and j['cheapest']['70b']['qlora']['tight'] is True" \
  guide --json
expect_ok "guide text: published column and numbered reasons" \
  "'18.42     21 [1]' in t and '[1] 7b LoRA: published 21 GB; this arithmetic gives 18.42 GB' in t" guide
expect_ok "size --explain of a preset LoRA shows the activation formula" \
  "'activations        1.86  gradient checkpointing: 32 layers x 2048 tokens (batch 1 x seq 2048) x 8192 B' in t and 'total: 18.42 GB' in t" \
  size --model 7b --workload lora --explain
expect_ok "guide LoRA activations grow with the sequence" \
  "[c for c in j['components'] if c['name'] == 'activations'][0]['gb'] > 3.7" \
  size --model 7b --workload lora --seq 4096 --json
expect_ok "catalog --json" \
  "len(j['term']) == 15 and len(j['spot']) == 9 and j['term'][1]['counts'] == [2, 4, 8] and j['spot'][0]['bandwidth_gb_per_s'] is None and j['term'][0]['regions'] == ['DFW-1']" \
  catalog --json
expect_ok "catalog --json: every card of both fleets has its dense TFLOPS and their source" \
  "all(t['bf16_dense_tflops'] and t['tflops_source'] and t['architecture'] != 'unknown' for t in j['term'] + j['spot']) and [t['fp8_dense_tflops'] is not None for t in j['term']] == [t['fp8'] for t in j['term']] and j['term'][3]['bf16_dense_tflops'] == 989" \
  catalog --json
expect_ok "catalog --hourly-rate: break-even against a rate" \
  "j['hourly_rate_usd'] == 2.5 and j['term'][3]['break_even_hours_vs_rate'] == 676.0" \
  catalog --hourly-rate 2.50 --json
expect_bad "catalog --hourly-rate -1" "--hourly-rate must be a positive USD amount" catalog --hourly-rate -1
expect_ok "catalog --use training: cards that shard first, why, the largest model 1 and 8 cards hold" \
  "j['use'] == 'training' and j['cards'][0]['fit'] and all(c['fit'] for c in j['cards'][:5]) and any(c['name'] == 'L40S' and not c['fit'] and 'data parallel only' in c['why'][0] for c in j['cards']) and all(c['largest'][0]['label'] == 'full fine-tuning' for c in j['cards']) and any(c['name'] == 'H100 SXM' and c['spot']['exact']['from_usd_per_gpu_hour'] == '2.880' and not c['spot']['live'] for c in j['cards'])" \
  catalog --use training --json
expect_ok "catalog --use inference: bandwidth, FP8, largest BF16/INT4 and the reference's tokens/s" \
  "[l['label'] for l in j['cards'][0]['largest']] == ['BF16', 'INT4'] and all(c['tokens_per_s'] > 0 and c['tokens_per_s_range'][0] < c['tokens_per_s'] for c in j['cards'] if c['fit']) and any(c['name'] == 'B300' and not c['fit'] for c in j['cards'])" \
  catalog --use inference --json
expect_ok "catalog --use fine-tuning text" "'LLM fine-tuning (gpuhub catalog --use fine-tuning)' in t and 'QLoRA: 1 card' in t and 'Why' in t" \
  catalog --use fine-tuning
expect_bad "catalog --use unknown" "unknown use 'pretraining'" catalog --use pretraining
expect_bad "catalog --use with --hourly-rate" "--hourly-rate applies to the fleet table" catalog --use training --hourly-rate 2
expect_ok "catalog tables" "'Term fleet' in t and 'Spot exchange' in t and 'not published' in t" catalog
expect_ok "models --json" "len(j['presets']) == 5 and any(m['id'] == 'meta-llama/Llama-3.1-8B' for m in j['bundled'])" \
  models --json
expect_ok "what make run prints" "'Best: H100 PCIe' in t" fit --model 70b --workload infer --precision fp8

# --- plan: hours and cost to finish ------------------------------------------------------------
expect_ok "plan training: ranked by cost to finish, each option with hours, finish, spot and term" \
  "j['job']['total_tokens'] == 3e8 and j['prices'] == 'opening_ask' and j['start'] == '2026-06-01T00:00:00Z' and j['cheapest'] == j['options'][0] and all(j['options'][i]['best_usd'] <= j['options'][i+1]['best_usd'] for i in range(len(j['options'])-1)) and all(o['hours'] > 0 and o['finish'] > j['start'] for o in j['options']) and j['error_bar']['p90'] > 0 and j['options'][0]['tokens_per_s_range'][0] < j['options'][0]['tokens_per_s'] < j['options'][0]['tokens_per_s_range'][1]" \
  plan --model meta-llama/Llama-3.1-8B --workload lora --batch 4 --tokens 100000000 --epochs 3 --start 2026-06-01T00:00:00Z --json
expect_ok "plan: the spot cost is the billed hours x the opening ask x the cards" \
  "all(abs(o['spot']['total_usd'] - o['spot']['hours_billed'] * o['spot']['price_usd_per_gpu_hour'] * o['count']) < 1e-6 for o in j['options'] if o['spot'])" \
  plan --model meta-llama/Llama-3.1-8B --workload lora --batch 4 --tokens 100000000 --gpu 'H100 SXM' --top 4 --json
expect_ok "plan --utilisation is applied and echoed" \
  "j['assumptions']['utilisation'] == 0.3" \
  plan --model 7b --workload full --tokens 1000000 --utilisation 0.3 --json
expect_ok "plan serving: replicas for the daily volume, cost per million tokens" \
  "j['job']['kind'] == 'serving' and j['options'][0]['replicas'] >= 1 and j['options'][0]['usd_per_million_tokens'] > 0 and j['workload']['context'] == 1280" \
  plan --model meta-llama/Llama-3.1-8B --workload infer --batch 32 --tokens-per-day 50000000 --json
expect_ok "plan text: the cheapest, the table and the arithmetic" \
  "'Cheapest to finish: ' in t and 'How the cheapest was computed' in t and 'FLOPs per token' in t and 'error bar' in t" \
  plan --model 7b --workload qlora --tokens 10000000 --explain
expect_bad "plan without tokens" "--tokens (tokens per epoch) or --samples" plan --model 7b --workload lora
expect_bad "plan utilisation above 1" "--utilisation must be a fraction" plan --model 7b --workload lora --tokens 5 --utilisation 2
expect_bad "plan tokens-per-day for training" "--tokens-per-day applies to serving" plan --model 7b --workload lora --tokens 5 --tokens-per-day 9
expect_bad "plan unknown gpu" "unknown GPU 'V100'" plan --model 7b --workload lora --tokens 5 --gpu V100
expect_bad "plan --gpus beyond a node is whole nodes" "--gpus must be a multiple of 8" plan --model 7b --workload lora --tokens 5 --gpus 12
expect_bad "plan --batch max for training" "--batch max applies to serving" plan --model 7b --workload lora --tokens 5 --batch max
expect_bad "plan --engine for training" "--engine applies to inference" plan --model 7b --workload lora --tokens 5 --engine vllm
expect_bad "plan --recompute typo" "--recompute must be full, selective or none" plan --model meta-llama/Llama-3.1-8B --workload full --tokens 5 --recompute some
expect_ok "plan --gpus 64: eight nodes, a quote, the layout and why" \
  "(lambda c: c['count'] == 64 and c['quote']['needed'] and c['quote']['nodes'] == 8 and c['layout']['nodes'] == 8 and len(c['considered']) >= 2 and c['error_band']['kind'] == 'training, several cards')(j['cheapest'])" \
  plan --model meta-llama/Llama-3.1-70B --workload full --tokens 1000000000 --gpus 64 --gpu 'H100 SXM' --json
expect_ok "plan: nothing fits a node, so whole nodes and a quote (the guide's 405B full fine-tune)" \
  "'multi-node: request a quote (gpuhub quote-request)' in t and '5 nodes of 8x MI300X' in t" \
  plan --model 405b --workload full --tokens 1000000000 --gpu MI300X
expect_ok "plan serving --batch max: the batch, prompt and decode tokens/s" \
  "(lambda c: c['batch'] > 1 and c['prompt_tokens_per_s'] == 0 and c['decode_tokens_per_s'] > 0)(j['cheapest'])" \
  plan --model meta-llama/Llama-3.1-8B --workload infer --engine vllm --batch max --prompt-tokens 0 --output-tokens 256 --tokens-per-day 100000000 --gpu 'H100 SXM' --json
expect_ok "size with a layout: tensor parallel 8 shards the weights" \
  "j['workload']['tp'] == 8 and abs(j['components'][0]['bytes'] - 8030261248 * 2 / 8) < 1" \
  size --model meta-llama/Llama-3.1-8B --workload full --gpus 8 --tp 8 --zero 1 --json
expect_bad "size: a layout that does not use every GPU" "the layout must use every GPU" size --model meta-llama/Llama-3.1-8B --workload full --gpus 8 --tp 3
expect_ok "guide: five nodes, quote" "'five nodes of 8x MI300X, quote' in t" guide
expect_bad "plan bad start" "--start must be a time like" plan --model 7b --workload lora --tokens 5 --start soon
# A server that cannot be reached is not bad input: exit 1, one line naming it.
"$bin" plan --model 7b --workload lora --tokens 5 --server http://127.0.0.1:1 >"$out" 2>"$err"
if [ $? -eq 1 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "cannot reach http://127.0.0.1:1" "$err"; then
  passed=$((passed + 1))
else
  fail "plan with an unreachable --server exits 1 naming it" plan --server http://127.0.0.1:1
fi

# --- bad input: exit 2, one line on stderr saying what to fix -------------------------------------
echo '{"model_type": "llama", "hidden_size": "big"' >"$work/broken.json"
printf '[[region]]\ncode = "DFW-1"\ncity = "Dallas"\n[[term]]\nname = "X"\nvram_gb = "lots"\n' >"$work/bad.toml"
expect_bad "unknown model" "unknown model '71b'" size --model 71b --workload infer
expect_bad "malformed config.json" "config.json of 'broken': not valid JSON" size --model "$work/broken.json" --workload infer
expect_bad "context 0" "context must be between 1 and" size --model 7b --workload infer --context 0
expect_bad "context not a number" "--context must be a whole number, got '8k'" size --model 7b --workload infer --context 8k
expect_bad "batch 10^12" "batch must be between 1 and 65536, got 1000000000000" size --model 7b --workload infer --batch 1000000000000
expect_bad "rank 0" "--rank must be between 1 and 65536" size --model 7b --workload lora --rank 0
expect_bad "unknown flag" "--contxt" size --model 7b --workload infer --contxt 5
expect_bad "unknown precision" "unknown precision 'fp6'" size --model 7b --workload infer --precision fp6
expect_bad "unknown workload" "unknown workload 'train'" fit --model 7b --workload train
expect_bad "missing workload" "--workload is required" fit --model 7b
expect_bad "missing model" "--model is required" size --workload infer
expect_bad "context for training" "--context applies to inference" size --model 7b --workload full --context 4096
expect_bad "grad accum for inference" "--grad-accum applies to training" size --model meta-llama/Llama-3.1-8B --workload infer --grad-accum 4
expect_bad "grad accum 0" "--grad-accum must be between 1 and 65536" size --model meta-llama/Llama-3.1-8B --workload full --grad-accum 0
expect_bad "prefill chunk for training" "--prefill-chunk applies to inference" size --model meta-llama/Llama-3.1-8B --workload lora --prefill-chunk 512
expect_bad "prefill chunk under the guide profile" "--prefill-chunk is part of the detailed profile" size --model 70b --workload infer --prefill-chunk 512
expect_bad "prefill chunk 0" "--prefill-chunk must be between 1 and" size --model meta-llama/Llama-3.1-8B --workload infer --prefill-chunk 0
expect_bad "FP8 on a card without it" "A100 SXM has no FP8 support" fit --model 70b --workload infer --precision fp8 --gpu "A100 SXM"
expect_bad "FP8 KV on a card without it" "RTX A5000 has no FP8 support" fit --model 7b --workload infer --kv-precision fp8 --gpu rtx-a5000
expect_bad "negative budget" "--max-monthly-usd must be a positive amount" fit --model 7b --workload infer --max-monthly-usd -5
expect_bad "budget not a number" "--max-monthly-usd: amount 'cheap'" fit --model 7b --workload infer --max-monthly-usd cheap
expect_bad "unknown region" "unknown region 'LHR-1' (regions: DFW-1, IAD-1, PDX-1)" fit --model 7b --workload infer --region LHR-1
expect_bad "unknown gpu" "unknown GPU 'V100'" fit --model 7b --workload infer --gpu V100
expect_bad "top 0" "--top must be between 1 and 100" fit --model 7b --workload infer --top 0
expect_bad "fit --gpus" "fit picks the number of GPUs itself" fit --model 7b --workload infer --gpus 2
expect_bad "size --region" "--region" size --model 7b --workload infer --region DFW-1
expect_bad "qlora with bf16" "QLoRA keeps the frozen base in 4-bit nf4" size --model 7b --workload qlora --precision bf16
expect_bad "no verb" "" 
expect_bad "malformed --catalog names file:line:field" "bad.toml:6: [[term]] \"X\" field 'vram_gb'" \
  fit --model 7b --workload infer --catalog "$work/bad.toml"
expect_bad "missing --catalog" "nope.toml" catalog --catalog "$work/nope.toml"
# billing talks to a server (tests/billing covers it); what it refuses before calling one:
GPUHUB_TOKEN= expect_bad "billing without a token" "needs --token" billing profile --server http://127.0.0.1:9
expect_bad "billing: not an invoice number" "not an invoice number" billing invoice ../x --token t
expect_bad "billing: --country is needed to change the profile" "--country is required" \
  billing profile --vat-id DE123456789 --token t --server http://127.0.0.1:9

# --- diffusion models (gpuhub size --model sdxl ...; docs/sizing-model.md §7) -----------------
expect_ok "size sdxl 1024x1024: 9.62 GB at the decode stage" \
  "j['peak_stage'] == 'decode' and abs(j['per_gpu_gb'] - 9.62203) < 1e-5 and j['params']['denoiser'] == 2567463684 and j['components'][-1]['formula'].startswith('5 x 256 channels x 1 frame x 1024 x 1024 x 2 B')" \
  size --model sdxl --json
expect_ok "size wan-14b, stages offload: Wan2.1's 69.1 GB at the encode stage" \
  "j['peak_stage'] == 'encode' and abs(j['per_gpu_gb'] - 69.06) < 0.01 and j['latent_tokens'] == 75600" \
  size --model wan-14b --offload stages --json
expect_ok "size flux-dev --explain prints the formulas" "'11.9e9 params x 2.0 B/param (bf16) = 23.80 GB' in t and 'decode_activations' in t" \
  size --model flux-dev --resolution 1024x1024 --explain
expect_ok "diffusion-models lists the bundled four" "len(j['models']) == 4" diffusion-models --json
expect_bad "a language-model flag on a diffusion model" "--context applies to language models" size --model sdxl --context 8
expect_bad "a diffusion flag on a language model" "--resolution applies to diffusion models" size --model 7b --workload infer --resolution 512x512
expect_bad "frames not 4n + 1" "frames must be 4n + 1" size --model wan-14b --frames 80
expect_bad "resolution not WxH" "--resolution must be WIDTHxHEIGHT" size --model sdxl --resolution big
expect_bad "offload mode" "--offload must be none" size --model flux-dev --offload sometimes
# --- use-case views of image-video, rendering and science ---------------------------------------
expect_ok "catalog --use science: MI300X first at 81.7 FP64 TFLOPS" \
  "j['cards'][0]['name'] == 'MI300X' and j['cards'][0]['general']['fp64_tflops'] == 81.7 and not [c for c in j['cards'] if c['name'] == 'L40S'][0]['fit']" \
  catalog --use science --json
expect_ok "catalog --use rendering: only cards with RT cores are fit" \
  "all(c['general']['rt_cores'] for c in j['cards'] if c['fit']) and j['cards'][0]['fit']" catalog --use rendering --json
expect_ok "catalog --use image: the RTX 4090 holds SDXL, not FLUX.1-dev" \
  "[f for f in [c for c in j['cards'] if c['name'] == 'RTX 4090'][0]['diffusion'] if f['name'] == 'sdxl'][0]['fits']" catalog --use image --json
expect_bad "unknown use" "expected training, fine-tuning, inference, image-video, rendering or science" catalog --use mining
# quote-request talks to a server (tests/server/quote_requests_test.cc covers it); what it refuses first:
expect_bad "quote-request create: a number flag that is not one" "--batch" quote-request create --model 405b --workload full --batch many --token t --server http://127.0.0.1:9

echo "cli: $passed passed, $failed failed"
[ $failed -eq 0 ]
