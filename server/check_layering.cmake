# Fails when a file under server/ includes across its transport folders.
#
# Run as a script: cmake -DSERVER_DIR=<dir holding the server sources> -P this.
# server/CMakeLists.txt runs it at configure time; tests/layering runs it again on the tree and
# checks that it rejects a tree that breaks the rule.
#
# server/ holds what both transports share (the gateway, config, request mapping, metrics,
# auth, logging); server/grpc/ the gRPC service and listener; server/http/ the OpenAI-style
# HTTP API, its listener and the playground. The shared files include neither transport, and
# neither transport includes the other. main.cc, which wires the process together, may include
# everything.
if(NOT SERVER_DIR)
  message(FATAL_ERROR "check_layering: pass -DSERVER_DIR=<path of server/>")
endif()
set(DLLM_SERVER_TOP main.cc)

file(GLOB_RECURSE sources RELATIVE ${SERVER_DIR} ${SERVER_DIR}/*.h ${SERVER_DIR}/*.cc)
set(violations "")
foreach(rel ${sources})
  list(FIND DLLM_SERVER_TOP "${rel}" top)
  if(NOT top EQUAL -1)
    continue()
  endif()
  if(rel MATCHES "^(grpc|http)/")
    set(from ${CMAKE_MATCH_1})
  elseif(rel MATCHES "/")
    string(APPEND violations "\n  server/${rel}: folder has no layer in server/check_layering.cmake")
    continue()
  else()
    set(from shared)
  endif()
  file(STRINGS ${SERVER_DIR}/${rel} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"server/(grpc|http)/")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"server/(grpc|http)/([^\"]*)\".*" "\\1" to
                         "${line}")
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" target "${line}")
    if(NOT to STREQUAL from)
      string(APPEND violations "\n  server/${rel} (${from}) includes ${target} (${to})")
    endif()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "server layering: includes that cross the transports:${violations}")
endif()
