# embed_files.cmake - writes a C source holding files as byte arrays, run at build time:
#
#   cmake -DDIR=<dir> -DOUT=<file.c> -DHEADER=<header to include> -DPREFIX=<symbol prefix>
#         -P embed_files.cmake
#
# Every file under DIR (recursively, sorted, dot files left out) becomes one entry of
#   const <PREFIX>_t <PREFIX>s[] = {{"path/under/dir", "content type", bytes, length, "etag"}, ..};
#   const size_t <PREFIX>s_count;
# The content type comes from the file's extension (an unknown one stops the build: a file served
# as the wrong type is refused by browsers under nosniff). The ETag is the first 32 hex digits of
# the file's SHA-256, quoted. Only CMake itself is needed: no xxd, no network. The output is
# written only when it changes, so an unchanged tree recompiles nothing.
cmake_minimum_required(VERSION 3.18)
foreach(var DIR OUT HEADER PREFIX)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_files.cmake: -D${var}= is required")
  endif()
endforeach()

set(types_html "text/html; charset=utf-8")
set(types_js "text/javascript; charset=utf-8")
set(types_mjs "text/javascript; charset=utf-8")
set(types_css "text/css; charset=utf-8")
set(types_svg "image/svg+xml")
set(types_png "image/png")
set(types_ico "image/x-icon")
set(types_json "application/json")
set(types_txt "text/plain; charset=utf-8")
set(types_md "text/plain; charset=utf-8")

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${DIR}" "${DIR}/*")
list(SORT files)
set(body "")
set(table "")
set(i 0)
foreach(rel IN LISTS files)
  get_filename_component(name "${rel}" NAME)
  if(name MATCHES "^\\.")
    continue()
  endif()
  string(REGEX MATCH "[^.]+$" ext "${name}")
  string(TOLOWER "${ext}" ext)
  if(NOT DEFINED types_${ext})
    message(FATAL_ERROR "embed_files.cmake: ${DIR}/${rel}: no content type for '.${ext}' files")
  endif()
  file(READ "${DIR}/${rel}" hex HEX)
  file(SHA256 "${DIR}/${rel}" sum)
  string(SUBSTRING "${sum}" 0 32 etag)
  string(LENGTH "${hex}" hex_len)
  math(EXPR len "${hex_len} / 2")
  # 0x.., one line per 24 bytes
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n    " bytes "${bytes}")
  string(APPEND body "/* ${rel} */\nstatic const unsigned char file_${i}[] = {\n    ${bytes}0x00};\n\n")
  string(APPEND table "    {\"${rel}\", \"${types_${ext}}\", file_${i}, ${len}, \"\\\"${etag}\\\"\"},\n")
  math(EXPR i "${i} + 1")
endforeach()

set(text "/* Generated at build time by cmake/embed_files.cmake from ${DIR}: do not edit. */\n")
string(APPEND text "#include <stddef.h>\n\n#include \"${HEADER}\"\n\n${body}")
string(APPEND text "const ${PREFIX}_t ${PREFIX}s[] = {\n${table}};\n\n")
string(APPEND text "const size_t ${PREFIX}s_count = ${i};\n")

set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
