// JSON (as RapidJSON parsed it) to template values: what a JSONL line's messages and tools are to
// a chat template. Objects keep their key order, as Python's json does.
#pragma once

#include <rapidjson/document.h>

#include "jinja/value.h"

namespace dsx::jinja {

Value from_json(const rapidjson::Value& json);

}  // namespace dsx::jinja
