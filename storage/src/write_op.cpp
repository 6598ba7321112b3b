#include "troupe/storage/write_op.hpp"

#include "troupe/storage/repositories.hpp"

namespace troupe::storage {

write_op append_message_op(message_record m) {
  auto shared = std::make_shared<const message_record>(std::move(m));
  auto op =
      make_write("append message", [shared](connection& c) { return insert_message(c, *shared); });
  op.message = std::move(shared);
  return op;
}

write_op edit_message_op(row_id id, std::string content) {
  return make_write("edit message", [id, content = std::move(content)](connection& c) {
    return update_message_content(c, id, content);
  });
}

write_op delete_message_op(row_id id) {
  return make_write("delete message", [id](connection& c) { return delete_message(c, id); });
}

write_op set_run_status_op(row_id id, run_status status, std::string error_text) {
  return make_write("set run status",
                    [id, status, error_text = std::move(error_text)](connection& c) {
                      return set_run_status(c, id, status, error_text);
                    });
}

write_op append_step_op(execution_step_record step) {
  return make_write("append step",
                    [step = std::move(step)](connection& c) { return append_step(c, step); });
}

} // namespace troupe::storage
