# Include roots that enforce the layering (docs/architecture.md): a library's headers are spelled from the source root
# ("planner/plan/plan.h"), but a target sees only the folders of the libraries it links. Each library gets a root of
# its own under the build tree holding one symbolic link, <root>/<dir> -> <source>/<dir>, so an include of a folder the
# target does not link (a wrong-way include: plan -> cost, runtime -> anything of ours) is "file not found".
function(cleave_include_root target dir)
  set(root ${PROJECT_BINARY_DIR}/include_roots/${target})
  get_filename_component(parent ${root}/${dir} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${dir})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${root}/${dir} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root})
endfunction()
