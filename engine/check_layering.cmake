# Fails when a file under engine/ includes a header of a layer above its own.
#
# Run as a script: cmake -DENGINE_DIR=<dir holding the engine sources> [-DSTAMP=<file>] -P this.
# engine/CMakeLists.txt runs it at configure time and again as a build step whenever an engine
# source changes, so an upward include fails the build, not a review. tests/layering checks that
# it rejects a tree that breaks the rule.
#
# Layers are the sub-folders of engine/ (a nested folder such as scheduler/shadow/ belongs to
# its top folder's layer); the public headers engine/engine.h and engine/shadow_sampling.h,
# which it includes ("api": request, event, option and shadow-sample value types plus the
# Engine interface), are their own layer, because decoding/ and scheduler/ speak their value
# types while the other files of engine/ itself (layer "engine": engine.cc, engine_impl.*, the
# definitions behind the api headers) sit on top of everything. A layer may include itself
# and the layers listed for it, nothing else. This table and the target_link_libraries lines
# of engine/CMakeLists.txt say the same thing.
set(DLLM_LAYER_core "")
set(DLLM_LAYER_backend core)
set(DLLM_LAYER_kv core backend)
set(DLLM_LAYER_tokenizer core)
set(DLLM_LAYER_model core backend kv tokenizer)
set(DLLM_LAYER_api core tokenizer)
set(DLLM_LAYER_decoding core backend kv tokenizer model)
set(DLLM_LAYER_scheduler core backend kv tokenizer model api decoding)
set(DLLM_LAYER_engine core backend kv tokenizer model api decoding scheduler)
set(DLLM_LAYERS core backend kv tokenizer model api decoding scheduler engine)
set(DLLM_API_HEADERS engine.h shadow_sampling.h)

if(NOT ENGINE_DIR)
  message(FATAL_ERROR "check_layering: pass -DENGINE_DIR=<path of engine/>")
endif()

# The layer of a path relative to engine/ (a source file or an include target).
function(dllm_layer_of rel out)
  list(FIND DLLM_API_HEADERS "${rel}" api_header)
  if(NOT api_header EQUAL -1)
    set(layer api)
  elseif(rel MATCHES "^([^/]+)/")
    set(layer ${CMAKE_MATCH_1})
  else()
    set(layer engine)
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources RELATIVE ${ENGINE_DIR}
     ${ENGINE_DIR}/*.h ${ENGINE_DIR}/*.cc ${ENGINE_DIR}/*.cu ${ENGINE_DIR}/*.cuh)
set(violations "")
foreach(rel ${sources})
  dllm_layer_of(${rel} from)
  list(FIND DLLM_LAYERS ${from} known)
  if(known EQUAL -1)
    string(APPEND violations "\n  engine/${rel}: folder '${from}' has no layer in "
           "engine/check_layering.cmake")
    continue()
  endif()
  file(STRINGS ${ENGINE_DIR}/${rel} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"engine/")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"engine/([^\"]*)\".*" "\\1" target "${line}")
    dllm_layer_of(${target} to)
    if(to STREQUAL from)
      continue()
    endif()
    list(FIND DLLM_LAYER_${from} ${to} allowed)
    if(allowed EQUAL -1)
      string(APPEND violations "\n  engine/${rel} (${from}) includes engine/${target} (${to})")
    endif()
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "engine layering: includes must point down "
          "(core <- backend <- kv <- tokenizer/model <- api <- decoding <- scheduler <- engine; "
          "see engine/check_layering.cmake):${violations}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
