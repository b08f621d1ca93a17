execute_process(
  COMMAND ${BENCH} --model ${MODEL} --tasks ${TASKS} --gen-length 8 --threads 1
          --policy none --policy entropy:tau=0.5,k=4 --policy dual --policy interval:n=4
          --decoding block:block_length=4 --decoding window:w=4,threshold=0.01
          --sweep tau=0:2:3 --sweep-out ${OUT} --batch 2
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "dllm-bench failed (${rc}):\n${out}\n${err}")
endif()
string(REGEX MATCHALL "\"speedup_vs_none\"" lines "${out}")
list(LENGTH lines n)
# block: none, entropy, dual, interval + 3 sweep; window: none, entropy, interval + 3 sweep
# (dual is rejected for the window schedule and reported as an error line)
if(NOT n EQUAL 13)
  message(FATAL_ERROR "expected 13 result lines, got ${n}:\n${out}\n${err}")
endif()
if(NOT out MATCHES "\"error\":\"INVALID_ARGUMENT: cache.policy dual requires")
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
string(REGEX MATCHALL "\"speedup_vs_baseline\"" vb "${out}")
list(LENGTH vb nvb)
if(NOT nvb EQUAL 14)
  message(FATAL_ERROR "expected speedup_vs_baseline on 14 rows, got ${nvb}:\n${out}")
endif()
string(REGEX MATCHALL "\"ms_per_partial_step\"" mp "${out}")
list(LENGTH mp nmp)
if(NOT nmp EQUAL 14)
  message(FATAL_ERROR "expected the step-time split on 14 rows, got ${nmp}:\n${out}")
endif()
if(NOT EXISTS ${OUT}.csv)
  message(FATAL_ERROR "no sweep CSV")
endif()
message(STATUS "${out}")
