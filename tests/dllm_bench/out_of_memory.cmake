# dllm-bench under an address-space limit (ulimit -v), from one that cannot even load the
# shared libraries up to one that runs: somewhere in between a thread or an allocation fails
# with an exception, and main() must report it as "dllm-bench: <what>" and exit 1, not die
# in std::terminate. The window moves with library sizes, so the limits are scanned.
# (Abseil's low-level allocator aborts on its own mmap failures; that is not ours to catch.)
set(reported "")
set(terminated "")
foreach(kib RANGE 8000 64000 1000)
  execute_process(
    COMMAND sh -c "ulimit -v ${kib} && exec \"$0\" \"$@\"" ${BENCH} --model ${MODEL}
            --tasks ${TASKS} --gen-length 8 --threads 1 --policy none
    OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(err MATCHES "terminate called")
    list(APPEND terminated "${kib} KiB: ${err}")
  endif()
  if(rc EQUAL 1 AND err MATCHES "(^|\n)dllm-bench: [^\n]+")
    list(APPEND reported "${kib} KiB: ${CMAKE_MATCH_0}")
  endif()
  if(rc EQUAL 0)
    break()
  endif()
endforeach()
if(terminated)
  message(FATAL_ERROR "an exception escaped main():\n${terminated}")
endif()
if(NOT reported)
  message(FATAL_ERROR "no limit between 8 and 64 MB made dllm-bench report a failure")
endif()
message(STATUS "reported:\n${reported}")
