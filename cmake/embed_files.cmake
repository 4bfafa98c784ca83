# Writes OUT, a C++ file defining tw::bundled_model_files(): the name (file stem)
# and text of each of FILES. Run with cmake -P.
set(body "")
foreach(f IN LISTS FILES)
  get_filename_component(stem ${f} NAME_WE)
  file(READ ${f} text)
  # A raw string literal; the delimiter cannot occur in our YAML files.
  string(APPEND body "      {\"${stem}\", R\"tw_embed(${text})tw_embed\"},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from traffic_profiles/models by cmake/embed_files.cmake.\n#include <string_view>\n#include <utility>\n#include <vector>\n\nnamespace tw {\nconst std::vector<std::pair<std::string_view, std::string_view>>& bundled_model_files() {\n  static const std::vector<std::pair<std::string_view, std::string_view>> files = {\n${body}  };\n  return files;\n}\n}  // namespace tw\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
