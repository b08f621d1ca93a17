# Runs dllm-bench on the test model and tasks with the given arguments, fails the test
# unless it exits 0, and sets `out` and `err` in the caller.
function(run_bench what)
  execute_process(COMMAND ${BENCH} --model ${MODEL} --tasks ${TASKS} ${ARGN}
                  OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dllm-bench ${what} failed (${rc}):\n${o}\n${e}")
  endif()
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

# Fails the test unless `regex` matches exactly `expected` times in `out` (each match is one
# line's worth when the regex ends in a line-local pattern); `what` names the check.
function(expect_count regex expected what)
  string(REGEX MATCHALL "${regex}" matches "${out}")
  list(LENGTH matches n)
  if(NOT n EQUAL ${expected})
    message(FATAL_ERROR "expected ${what} on ${expected} rows, got ${n}:\n${out}")
  endif()
endfunction()

run_bench("" --gen-length 8 --threads 1
          --policy none --policy entropy:tau=0.5,k=4 --policy dual --policy interval:n=4
          --decoding block:block_length=4 --decoding window:w=4,threshold=0.01
          --sweep tau=0:2:3 --sweep-out ${OUT} --batch 2)
string(REGEX MATCHALL "\"speedup_vs_none\"" lines "${out}")
list(LENGTH lines n)
# block: none, entropy, dual, interval + 3 sweep; window: none, entropy, interval + 3 sweep
# (dual is rejected for the window schedule and reported as an error line)
if(NOT n EQUAL 13)
  message(FATAL_ERROR "expected 13 result lines, got ${n}:\n${out}\n${err}")
endif()
if(NOT out MATCHES "\"error\":\"INVALID_ARGUMENT: cache.policy: dual requires decoding.schedule block")
  message(FATAL_ERROR "expected the dual/window rejection line:\n${out}")
endif()
# The baseline (default: vanilla) comes first, measured in the same run, and every row
# reports the speed-up against it and the full/partial step-time split.
string(REGEX MATCH "^[^\n]*" first "${out}")
if(NOT first MATCHES "\"baseline\":\"vanilla\"" OR NOT first MATCHES "\"speedup_vs_baseline\":1.0")
  message(FATAL_ERROR "expected the vanilla baseline row first:\n${out}")
endif()
if(NOT first MATCHES "\"block_length\":8" OR NOT first MATCHES "\"steps\":8}")
  message(FATAL_ERROR "vanilla is one block of min(32, G) = 8 with one token per step:\n${first}")
endif()
# Tasks with a "family" are also scored per family (the third task has none).
expect_count("\"accuracy_by_family\":{\"add\":[0-9.]+}" 14 "accuracy_by_family {add}")
expect_count("\"speedup_vs_baseline\"" 14 "speedup_vs_baseline")
expect_count("\"ms_per_partial_step\"" 14 "the step-time split")
# Every non-baseline row compares its answers with the baseline's, task by task. On this
# random-weight model the window decodings answer differently from vanilla somewhere.
string(REGEX MATCHALL "\"vs_baseline\":{\"accuracy_diff\":[-0-9.e]+,\"accuracy_diff_se\":[0-9.e]+,\"changed\":[0-9]+,\"gained\":[0-9]+,\"lost\":[0-9]+,\"tasks\":3}" pairs "${out}")
list(LENGTH pairs npairs)
if(NOT npairs EQUAL 13)
  message(FATAL_ERROR "expected vs_baseline on the 13 non-baseline rows, got ${npairs}:\n${out}")
endif()
if(NOT out MATCHES "\"changed\":[1-9]")
  message(FATAL_ERROR "expected some setting to change an answer against vanilla:\n${out}")
endif()
if(NOT EXISTS ${OUT}.csv)
  message(FATAL_ERROR "no sweep CSV")
endif()
# EntropyCache's rows (block, window and the 6 sweep rows) charge the entropy term of the row
# statistics to its decision, at a measured rate that is never 0 (it once read 0 ns: the fused
# difference it was then taken from hid under code placement; bench/entropy_cost.h), over rows
# the engine did predict. Rows of other policies carry no charge.
expect_count("\"decision_cost\":{\"entropy_ns_per_row\":([1-9][0-9.]*|0\\.[0-9]*[1-9][0-9]*),\"entropy_term_s\":[0-9.e-]+,\"policy_s\":[0-9.e-]+,\"predicted_rows\":[1-9][0-9]*}[^\n]*\"policy\":\"entropy\""
             8 "the entropy term charged")
expect_count("\"entropy_ns_per_row\"" 8 "an entropy charge rate (entropy rows only)")
# none x 2 (block, window) + vanilla baseline, dual (block), interval x 2
expect_count("\"entropy_term_s\":0\\.0,[^\n]*\"policy\":\"(none|dual|interval)\"" 6
             "no entropy charge")
# The plot draws one line per decoding: CSV data rows 0-2 (block) and 3-5 (window).
file(READ ${OUT}.gp gp)
if(NOT gp MATCHES "every ::0::2 using 9:4 with linespoints title 'block:block_length=4'"
   OR NOT gp MATCHES "every ::3::5 using 9:4 with linespoints title 'window:w=4,threshold=0.01'")
  message(FATAL_ERROR "expected one plotted series per decoding in ${OUT}.gp:\n${gp}")
endif()
message(STATUS "${out}")

# --shadow: every setting carries its shadow summary; partial-step settings have samples, the
# none baseline has none (it never runs a partial step), and --shadow-out gets one CSV line
# per sample.
run_bench("--shadow" --gen-length 8 --threads 1
          --policy none --policy entropy:tau=inf,k=2 --decoding window:w=4,threshold=0.01
          --batch 2 --shadow 1 --shadow-out ${OUT}_shadow.csv)
string(REGEX MATCHALL "\"shadow\":{[^}]*\"mean_kl\"" shadow_lines "${out}")
list(LENGTH shadow_lines n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected 2 lines with a shadow summary, got ${n}:\n${out}\n${err}")
endif()
# Both mismatch rates, the decision one and the token one the autotuner steers by; a token
# mismatch is a decision mismatch, so its rate is never the larger.
string(REGEX MATCHALL "\"mismatch_rate\":([0-9.e-]+),[^\n]*\"token_mismatch_rate\":([0-9.e-]+)" rates "${out}")
list(LENGTH rates nrates)
if(NOT nrates EQUAL 2)
  message(FATAL_ERROR "expected both mismatch rates in the 2 shadow summaries:\n${out}")
endif()
foreach(line ${rates})
  string(REGEX MATCH "\"mismatch_rate\":([0-9.e-]+)" _ "${line}")
  set(decision ${CMAKE_MATCH_1})
  string(REGEX MATCH "\"token_mismatch_rate\":([0-9.e-]+)" _ "${line}")
  if(CMAKE_MATCH_1 GREATER decision)
    message(FATAL_ERROR "token-mismatch rate above the decision-mismatch rate: ${line}")
  endif()
endforeach()
if(NOT out MATCHES "\"policy\":\"none\"[^\n]*\"samples\":0")
  message(FATAL_ERROR "the none baseline should have no shadow samples:\n${out}")
endif()
if(NOT out MATCHES "\"policy\":\"entropy\"[^\n]*\"samples\":[1-9]")
  message(FATAL_ERROR "the cached setting should have shadow samples:\n${out}")
endif()
file(STRINGS ${OUT}_shadow.csv csv_lines)
list(LENGTH csv_lines csv_n)
if(csv_n LESS 2)
  message(FATAL_ERROR "expected a header and samples in ${OUT}_shadow.csv")
endif()
list(GET csv_lines 0 csv_header)
if(NOT csv_header MATCHES ",max_prob_change,committed,token_mismatch,drift_prompt,")
  message(FATAL_ERROR "the shadow CSV lacks the token_mismatch column: ${csv_header}")
endif()
message(STATUS "${out}")

# --sweep with an explicit tau list, under --shadow: one CSV row per tau, with the cache-quality
# columns filled for thresholds that allow partial steps.
run_bench("--sweep tau=list" --gen-length 8 --threads 1
          --policy entropy:tau=0.5,k=2 --sweep tau=0,1e-3,inf --sweep-out ${OUT}_list --shadow 1)
file(STRINGS ${OUT}_list.csv csv)
list(LENGTH csv ncsv)
if(NOT ncsv EQUAL 4)
  message(FATAL_ERROR "expected a header and 3 tau rows, got ${ncsv}:\n${csv}")
endif()
list(GET csv 0 header)
if(NOT header MATCHES ",shadow_samples,mismatch_rate,mean_kl,drift_prompt"
   OR NOT header MATCHES ",token_mismatch_rate$")
  message(FATAL_ERROR "sweep CSV lacks the shadow columns: ${header}")
endif()
list(GET csv 3 inf_row)
if(NOT inf_row MATCHES "^\"[^\"]*\",inf,2,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[1-9][0-9]*,")
  message(FATAL_ERROR "tau=inf row has no shadow samples: ${inf_row}")
endif()

# --shadow-budget: the row reports the shadows' time_fraction; a budget no run can repay lets
# exactly the first drawn shadow run; a budget <= 0 is refused, naming the flag.
run_bench("--shadow-budget" --gen-length 8 --threads 1
          --policy entropy:tau=inf,k=2 --decoding window:w=4,threshold=0.01 --shadow 1
          --shadow-budget 1e-9)
if(NOT out MATCHES "\"policy\":\"entropy\"[^\n]*\"samples\":1,[^\n]*\"time_fraction\":")
  message(FATAL_ERROR "expected one shadow sample and a time_fraction:\n${out}")
endif()
# shadow=RATE in a policy spec: that setting alone is shadowed, beside the same policy without
# it in the same run (no --shadow).
run_bench("policy shadow=" --gen-length 8 --threads 1 --decoding window:w=4,threshold=0.01
          --policy entropy:tau=inf,k=2 --policy entropy:tau=inf,k=2,shadow=1)
if(NOT out MATCHES "\"params\":{\"k\":2,\"tau\":\"inf\"}[^\n]*\"samples\":0,"
   OR NOT out MATCHES "\"params\":{\"k\":2,\"shadow\":1[.0]*,\"tau\":\"inf\"}[^\n]*\"samples\":[1-9]")
  message(FATAL_ERROR "expected the plain row without samples and the shadow=1 row with:\n${out}")
endif()
# logprobs=N in a policy spec: the same policy with and without logprobs in one run; asking
# for them changes no answer (against the same setting as the baseline) and no row count.
run_bench("policy logprobs=" --gen-length 8 --threads 1 --none=false
          --decoding block:block_length=4 --baseline block:block_length=4@entropy:tau=0.5,k=2
          --policy entropy:tau=0.5,k=2 --policy entropy:tau=0.5,k=2,logprobs=20)
string(REGEX MATCH "\"policy\":\"entropy\"[^\n]*" plain "${out}")
string(REGEX MATCH "\"logprobs\":20[^\n]*" with "${out}")
string(REGEX MATCH "\"rows_per_token\":[0-9.]+" plain_rows "${plain}")
string(REGEX MATCH "\"rows_per_token\":[0-9.]+" with_rows "${with}")
string(REGEX MATCH "\"changed\":[0-9]+" with_changed "${with}")
if(plain_rows STREQUAL "" OR NOT plain_rows STREQUAL with_rows
   OR NOT with_changed STREQUAL "\"changed\":0" OR plain MATCHES "\"logprobs\"")
  message(FATAL_ERROR "expected equal rows and answers with and without logprobs:\n${out}")
endif()
execute_process(
  COMMAND ${BENCH} --model ${MODEL} --tasks ${TASKS} --shadow 1 --shadow-budget 0
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "--shadow-budget must be > 0")
  message(FATAL_ERROR "--shadow-budget 0 should fail naming it (${rc}):\n${err}")
endif()

# --autotune: needs --shadow; with it, the entropy row reports the tau scale the engine's
# controller reached. Windows of 1 sample have a mismatch rate of 0 or 1, never inside
# [budget/2, budget], so every sample moves the scale: after any sample it is not 1.
# (tau=inf: partial steps, hence samples, on the high-entropy random fixture.)
execute_process(
  COMMAND ${BENCH} --model ${MODEL} --tasks ${TASKS} --gen-length 8 --threads 1
          --policy entropy:tau=0.5,k=2 --autotune 0.05
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "--autotune needs --shadow")
  message(FATAL_ERROR "--autotune without --shadow should fail naming it (${rc}):\n${err}")
endif()
run_bench("--autotune" --gen-length 8 --threads 1
          --policy entropy:tau=inf,k=2 --shadow 1 --autotune 0.05:1)
if(NOT out MATCHES "\"policy\":\"entropy\"[^\n]*\"samples\":[1-9][^\n]*\"tau_scale\":")
  message(FATAL_ERROR "the entropy row lacks samples or tau_scale:\n${out}")
endif()
if(out MATCHES "\"policy\":\"entropy\"[^\n]*\"tau_scale\":1(\\.0)?[,}]")
  message(FATAL_ERROR "the autotuner never moved the scale:\n${out}")
endif()
message(STATUS "${out}")

# Costs per token on every row; --answers-out stores each row with its per-task answers,
# baseline first; --baseline-from pairs a later run against that stored baseline without
# running it (its row comes back marked baseline_from), and --none=false leaves out the `none`
# setting. The stored baseline must match the run: other tasks are refused, naming both.
run_bench("--answers-out" --gen-length 8 --threads 1 --decoding window:w=4,threshold=0.01
          --policy entropy:tau=inf,k=2 --answers-out ${OUT}_answers.jsonl)
expect_count("\"cpu_s\":[0-9.e-]+,\"cpu_s_per_token\":[0-9.e-]+,[^\n]*\"macs_per_token\":[1-9][0-9.e+]*,[^\n]*\"rows_per_token\":[0-9.]*[1-9]" 3 "the cost columns")
expect_count("\"speedup_vs_baseline_cpu\":[0-9.]+" 3 "the CPU-time speed-up")
file(STRINGS ${OUT}_answers.jsonl stored)
list(LENGTH stored nstored)
list(GET stored 0 stored_first)
if(NOT nstored EQUAL 3 OR NOT stored_first MATCHES "^{\"answers\":\\[\"[^\n]*\"correct\":\\[(true|false),(true|false),(true|false)\\],\"row\":{[^\n]*\"baseline\":\"vanilla\"")
  message(FATAL_ERROR "expected 3 stored rows, the vanilla baseline first with 3 answers:\n${stored_first}")
endif()
run_bench("--baseline-from" --gen-length 8 --threads 1 --decoding window:w=4,threshold=0.01
          --policy entropy:tau=inf,k=2 --none=false --baseline-from ${OUT}_answers.jsonl)
expect_count("\"baseline_from\":" 1 "the stored baseline's row")
expect_count("\"policy\":\"none\"" 1 "no none setting (only the stored vanilla row)")
expect_count("\"vs_baseline\":{[^}]*\"tasks\":3}" 1 "the pairing with the stored baseline")
execute_process(
  COMMAND ${BENCH} --model ${MODEL} --tasks ${TASKS} --limit 2 --gen-length 8 --threads 1
          --baseline-from ${OUT}_answers.jsonl
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "its baseline ran 3 tasks[^\n]*this run has 2 tasks")
  message(FATAL_ERROR "a stored baseline of other tasks should be refused (${rc}):\n${err}")
endif()

# The attention-based policies with their options: one row each beside none, their parameters
# echoed, and a decision share above zero (the attention maps are charged to it).
run_bench("d2cache/elastic" --gen-length 8 --threads 1 --decoding window:w=4,threshold=0.01
          --policy d2cache:current_k=4,rollout_p=0.2,sigma=5 --policy elastic:gamma=1)
if(NOT out MATCHES "\"params\":{\"current_k\":4,\"rollout_p\":0.2[0-9]*,\"sigma\":5[.0]*}"
   OR NOT out MATCHES "\"params\":{\"gamma\":1[.0]*}")
  message(FATAL_ERROR "expected the d2cache and elastic rows with their parameters:\n${out}")
endif()
# (JSON keys are sorted: the decision share comes before the policy name.)
if(NOT out MATCHES "\"decision_overhead_frac\":0\\.[0-9]*[1-9][^\n]*\"policy\":\"elastic\"")
  message(FATAL_ERROR "the elastic row should charge its attention maps as decision time:\n${out}")
endif()
# A setting identical to the baseline changes nothing (the engine is deterministic).
run_bench("(same as baseline)" --gen-length 8 --threads 1 --policy none
          --baseline block:block_length=4 --decoding block:block_length=4)
if(NOT out MATCHES "\"changed\":0,\"gained\":0,\"lost\":0,\"tasks\":3}")
  message(FATAL_ERROR "a setting equal to its baseline must change no answer:\n${out}")
endif()

# A task's "canvas": {"fixed": TEXT} holds TEXT's tokens, {"masks_for": TEXT} leaves as many
# masks, and masks fill the rest. The answer scored includes the fixed text.
set(CANVAS_TASKS ${OUT}_canvas.jsonl)
file(WRITE ${CANVAS_TASKS}
  "{\"prompt\": \"1+1?\", \"answer\": \"2\", \"canvas\": [{\"fixed\": \"2\"}]}\n"
  "{\"prompt\": \"Hi\", \"answer\": \"zz\", \"canvas\": [{\"masks_for\": \"ab\"}, {\"fixed\": \"Hello\"}]}\n")
execute_process(
  COMMAND ${BENCH} --model ${MODEL} --tasks ${CANVAS_TASKS} --gen-length 8 --threads 1
          --none=false --decoding block:block_length=4 --policy entropy:tau=0.5,k=2
          --answers-out ${OUT}_canvas_answers.jsonl
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "dllm-bench with canvas tasks failed (${rc}):\n${out}\n${err}")
endif()
# One answers row for the vanilla baseline and one for the entropy setting. (Read whole: the
# answers may hold ';', which CMake would split a list at.)
file(READ ${OUT}_canvas_answers.jsonl answer_rows)
string(REGEX MATCHALL "\"answers\":\\[\"2[^\"]*\",\"[^\"]*Hello[^\"]*\"\\]" placed "${answer_rows}")
list(LENGTH placed n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected the fixed text at its place in both rows' answers:\n${answer_rows}")
endif()
# Bad canvases end the run with an error that names the problem.
function(expect_bad_canvas task regex what)
  file(WRITE ${CANVAS_TASKS} "${task}\n")
  execute_process(
    COMMAND ${BENCH} --model ${MODEL} --tasks ${CANVAS_TASKS} --gen-length 8 --threads 1
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(rc EQUAL 0 OR NOT err MATCHES "${regex}")
    message(FATAL_ERROR "${what} should fail naming it (${rc}):\n${err}")
  endif()
endfunction()
expect_bad_canvas(
  "{\"prompt\": \"Hi\", \"answer\": \"zz\", \"canvas\": [{\"fixed\": \"one two three four five six seven eight nine\"}]}"
  "leaving no mask in --gen-length 8" "a canvas longer than the answer")
expect_bad_canvas("{\"prompt\": \"Hi\", \"answer\": \"zz\", \"canvas\": [{\"fixed\": 3}]}"
                  ":1: expected \"canvas\"" "a canvas piece that is not text")
