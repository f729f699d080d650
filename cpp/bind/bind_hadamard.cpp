// Hadamard-family bindings: client perturbation, report validation, accumulation.
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "common.hpp"
#include "ldpfast/hadamard.hpp"

namespace ldpfast::bind {

namespace {

constexpr int kGroupColumns = 7;  // a0, a1, hash_modulus, col_offset, rows, cell_base, shift

std::vector<HadamardGroup> groups_from_table(const py::handle& table_obj) {
  auto table = checked_array<std::uint64_t>(table_obj, "groups_table", 2);
  if (table.shape(1) != kGroupColumns || table.shape(0) < 1)
    throw py::value_error("groups_table must have shape (n_groups >= 1, 7)");
  std::vector<HadamardGroup> out(static_cast<std::size_t>(table.shape(0)));
  const std::uint64_t* t = table.data();
  for (std::size_t g = 0; g < out.size(); ++g) {
    const std::uint64_t* row = t + g * kGroupColumns;
    out[g] = HadamardGroup{row[0], row[1], row[2], row[3], row[4], row[5], row[6]};
    if (out[g].rows < 1 || (out[g].rows & (out[g].rows - 1)) || out[g].rows > (std::uint64_t{1} << 32))
      throw py::value_error("groups_table rows must be powers of two <= 2^32");
    if (out[g].shift > 63) throw py::value_error("groups_table shift must be < 64");
  }
  return out;
}

const std::uint32_t* optional_u32(const std::optional<py::array>& arr, const char* name, std::size_t n,
                                  py::array_t<std::uint32_t>* keep) {
  if (!arr) return nullptr;
  *keep = checked_array<std::uint32_t>(*arr, name);
  check_same_length(static_cast<py::ssize_t>(n), keep->size(), name);
  return keep->data();
}

// Server-assigned groups and rows given to hadamard_perturb must be in range. O(n): run
// without the GIL.
void check_assigned(const std::vector<HadamardGroup>& groups, const std::uint32_t* g_in,
                    const std::uint32_t* r_in, std::size_t n, int threads) {
  std::vector<std::uint64_t> group_rows(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) group_rows[g] = r_in ? groups[g].rows : ~std::uint64_t{0};
  std::vector<std::uint32_t> zeros;
  const std::uint32_t* rows_check = r_in;
  if (!rows_check) {
    zeros.assign(n, 0);
    rows_check = zeros.data();
  }
  const std::size_t bad =
      hadamard_first_invalid(g_in, rows_check, nullptr, n, group_rows.data(), groups.size(), threads);
  if (bad < n) {
    if (g_in && g_in[bad] >= groups.size())
      throw py::value_error("groups[" + std::to_string(bad) + "] = " + std::to_string(g_in[bad]) +
                            " is out of range [0, " + std::to_string(groups.size()) + ")");
    throw py::value_error("rows[" + std::to_string(bad) + "] = " + std::to_string(r_in[bad]) +
                          " is out of range for its group");
  }
}

py::tuple py_hadamard_perturb(const py::bytes& key, const py::handle& x_obj, const py::handle& table_obj,
                              const py::handle& level_first_obj, const py::handle& level_count_obj,
                              std::optional<FieldSpec> field, std::optional<py::array> groups_in,
                              std::optional<py::array> rows_in, std::uint64_t flip_threshold, int threads) {
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  const std::vector<HadamardGroup> groups = groups_from_table(table_obj);
  auto level_first = checked_array<std::uint32_t>(level_first_obj, "level_first");
  auto level_count = checked_array<std::uint32_t>(level_count_obj, "level_count");
  check_same_length(level_first.size(), level_count.size(), "level_count");
  for (py::ssize_t l = 0; l < level_first.size(); ++l)
    if (level_count.data()[l] < 1 || std::uint64_t{level_first.data()[l]} + level_count.data()[l] > groups.size())
      throw py::value_error("levels must name non-empty ranges of groups");
  for (const auto& g : groups)
    if (g.hash_modulus && !field) throw py::value_error("a hashing group needs a field");
  const std::size_t n = static_cast<std::size_t>(x.size());
  const bool multi = groups.size() > 1;
  py::array_t<std::uint32_t> group_keep, row_keep;
  const std::uint32_t* g_in = optional_u32(groups_in, "groups", n, &group_keep);
  const std::uint32_t* r_in = optional_u32(rows_in, "rows", n, &row_keep);
  if (g_in && !multi) throw py::value_error("groups given for a single-group protocol");
  py::array_t<std::uint32_t> group_out(multi ? n : 0), row_out(n);
  py::array_t<std::int8_t> bits(n);
  std::uint32_t* gp = multi ? group_out.mutable_data() : nullptr;
  std::uint32_t* rp = row_out.mutable_data();
  if (g_in || r_in)
    without_gil([&] {  // copied first: the kernel reads the checked copy, whatever happens to the input
      if (g_in) std::copy(g_in, g_in + n, gp);
      if (r_in) std::copy(r_in, r_in + n, rp);
      check_assigned(groups, g_in ? gp : nullptr, r_in ? rp : nullptr, n, threads);
    });
  const RngKey k = key_from_bytes(key);
  HadamardPlan plan{field ? &*field : nullptr,
                    groups.data(),
                    groups.size(),
                    level_first.data(),
                    level_count.data(),
                    static_cast<std::size_t>(level_first.size()),
                    flip_threshold};
  if (plan.n_levels == 0) throw py::value_error("at least one level is needed");
  const std::uint64_t* px = x.data();
  std::int8_t* pb = bits.mutable_data();
  interruptible([&] { hadamard_perturb(plan, k, px, n, gp, multi && !g_in, rp, !r_in, pb, threads); });
  return py::make_tuple(multi ? py::object(group_out) : py::object(py::none()), row_out, bits);
}

std::size_t py_hadamard_first_invalid(std::optional<py::array> groups_obj, const py::handle& rows_obj,
                                      const py::handle& bits_obj, const py::handle& group_rows_obj, int threads) {
  auto rows = checked_array<std::uint32_t>(rows_obj, "rows");
  auto bits = checked_array<std::int8_t>(bits_obj, "bits");
  auto group_rows = checked_array<std::uint64_t>(group_rows_obj, "group_rows");
  const std::size_t n = static_cast<std::size_t>(rows.size());
  check_same_length(rows.size(), bits.size(), "bits");
  if (group_rows.size() < 1) throw py::value_error("group_rows must not be empty");
  py::array_t<std::uint32_t> keep;
  const std::uint32_t* g = optional_u32(groups_obj, "groups", n, &keep);
  const std::uint32_t* r = rows.data();
  const std::int8_t* b = bits.data();
  const std::uint64_t* gr = group_rows.data();
  const std::size_t n_groups = static_cast<std::size_t>(group_rows.size());
  return interruptible([&] { return hadamard_first_invalid(g, r, b, n, gr, n_groups, threads); });
}

// The group map of an update: copies of group_rows and cell_base (the kernel reads them
// many times), each group's cells checked to lie inside z (written so that the sum cannot
// wrap).
struct CheckedMap {
  std::vector<std::uint64_t> group_rows, cell_base;
  GroupMap map() const { return GroupMap{cell_base.data(), group_rows.data(), group_rows.size()}; }
};

CheckedMap checked_map(const py::array_t<std::uint64_t>& group_rows, const py::array_t<std::uint64_t>& cell_base,
                       std::uint64_t z_size) {
  CheckedMap out{std::vector<std::uint64_t>(group_rows.data(), group_rows.data() + group_rows.size()),
                 std::vector<std::uint64_t>(cell_base.data(), cell_base.data() + cell_base.size())};
  for (std::size_t g = 0; g < out.group_rows.size(); ++g) {
    const std::uint64_t rows = out.group_rows[g], base = out.cell_base[g];
    if (rows > z_size || base > z_size - rows)
      throw py::value_error("cell_base[" + std::to_string(g) + "] + group_rows[" + std::to_string(g) +
                            "] = " + std::to_string(base) + " + " + std::to_string(rows) +
                            " exceeds the size of z (" + std::to_string(z_size) + ")");
  }
  return out;
}

// An optional int64 total the update adds to (length `length`, writable).
std::int64_t* optional_total(const std::optional<py::array>& arr, const char* name, py::ssize_t length,
                             py::array_t<std::int64_t>* keep) {
  if (!arr) return nullptr;
  *keep = checked_array<std::int64_t>(*arr, name, 1, true);
  check_same_length(length, keep->size(), name);
  return keep->mutable_data();
}

std::size_t run_update(const ReportColumns& in, std::size_t n, const CheckedMap& map,
                       py::array_t<std::int64_t>& z, const UpdateTotals& totals, int threads) {
  std::int64_t* pz = z.mutable_data();
  const std::size_t n_cells = static_cast<std::size_t>(z.size());
  const GroupMap m = map.map();
  return interruptible([&] { return hadamard_update(in, n, m, n_cells, pz, totals, threads); });
}

void py_hadamard_accumulate(std::optional<py::array> groups_obj, const py::handle& rows_obj,
                            const py::handle& bits_obj, const py::handle& cell_base_obj, const py::handle& z_obj,
                            int threads) {
  auto rows = checked_array<std::uint32_t>(rows_obj, "rows");
  auto bits = checked_array<std::int8_t>(bits_obj, "bits");
  auto cell_base = checked_array<std::uint64_t>(cell_base_obj, "cell_base");
  auto z = checked_array<std::int64_t>(z_obj, "z", -1, true);
  const std::size_t n = static_cast<std::size_t>(rows.size());
  check_same_length(rows.size(), bits.size(), "bits");
  if (cell_base.size() < 1) throw py::value_error("cell_base must not be empty");
  py::array_t<std::uint32_t> keep;
  const std::uint32_t* g = optional_u32(groups_obj, "groups", n, &keep);
  // Each group may use every cell from its base to the end of z.
  const std::uint64_t z_size = static_cast<std::uint64_t>(z.size());
  py::array_t<std::uint64_t> group_rows(cell_base.size());
  for (py::ssize_t i = 0; i < cell_base.size(); ++i) {
    if (cell_base.data()[i] > z_size) throw py::value_error("cell_base entries must be <= len(z)");
    group_rows.mutable_data()[i] = z_size - cell_base.data()[i];
  }
  const CheckedMap map = checked_map(group_rows, cell_base, z_size);
  const std::size_t bad =
      run_update(ReportColumns{g, rows.data(), bits.data()}, n, map, z, UpdateTotals{nullptr, nullptr}, threads);
  if (bad < n)
    throw py::value_error("report " + std::to_string(bad) +
                          " has a group, cell or bit outside the table (z unchanged)");
}

std::size_t py_hadamard_update(std::optional<py::array> groups_obj, const py::handle& rows_obj,
                               const py::handle& bits_obj, const py::handle& group_rows_obj,
                               const py::handle& cell_base_obj, const py::handle& z_obj, int threads,
                               std::optional<py::array> group_sizes_obj, std::optional<py::array> count_obj) {
  auto rows = checked_array<std::uint32_t>(rows_obj, "rows");
  auto bits = checked_array<std::int8_t>(bits_obj, "bits");
  auto group_rows = checked_array<std::uint64_t>(group_rows_obj, "group_rows");
  auto cell_base = checked_array<std::uint64_t>(cell_base_obj, "cell_base");
  auto z = checked_array<std::int64_t>(z_obj, "z", -1, true);
  const std::size_t n = static_cast<std::size_t>(rows.size());
  check_same_length(rows.size(), bits.size(), "bits");
  check_same_length(group_rows.size(), cell_base.size(), "cell_base");
  if (group_rows.size() < 1) throw py::value_error("group_rows must not be empty");
  const CheckedMap map = checked_map(group_rows, cell_base, static_cast<std::uint64_t>(z.size()));
  py::array_t<std::uint32_t> keep;
  const std::uint32_t* gp = optional_u32(groups_obj, "groups", n, &keep);
  py::array_t<std::int64_t> sizes_keep, count_keep;
  const UpdateTotals totals{optional_total(group_sizes_obj, "group_sizes", group_rows.size(), &sizes_keep),
                            optional_total(count_obj, "count", 1, &count_keep)};
  return run_update(ReportColumns{gp, rows.data(), bits.data()}, n, map, z, totals, threads);
}

py::tuple py_rhr_perturb(const py::bytes& key, const py::handle& x_obj, std::uint32_t base_bits,
                         std::uint64_t hsize, std::uint64_t flip_threshold, std::optional<py::array> rows_in,
                         int threads) {
  auto x = checked_array<std::uint64_t>(x_obj, "x");
  if (base_bits > 30) throw py::value_error("base_bits must be <= 30");
  if (hsize < 1 || (hsize & (hsize - 1)) || hsize > (std::uint64_t{1} << 32))
    throw py::value_error("hsize must be a power of two <= 2^32");
  const std::size_t n = static_cast<std::size_t>(x.size());
  py::array_t<std::uint32_t> keep;
  const std::uint32_t* r_in = optional_u32(rows_in, "rows", n, &keep);
  py::array_t<std::uint32_t> row_out(n), z(n);
  std::uint32_t* rp = row_out.mutable_data();
  if (r_in)
    without_gil([&] {  // the kernel reads the checked copy
      std::copy(r_in, r_in + n, rp);
      for (std::size_t i = 0; i < n; ++i)
        if (rp[i] >= hsize)
          throw py::value_error("rows[" + std::to_string(i) + "] = " + std::to_string(rp[i]) +
                                " is out of range [0, " + std::to_string(hsize) + ")");
    });
  const RngKey k = key_from_bytes(key);
  const std::uint64_t* px = x.data();
  std::uint32_t* pz = z.mutable_data();
  interruptible([&] { rhr_perturb(k, px, n, base_bits, hsize, flip_threshold, rp, !r_in, pz, threads); });
  return py::make_tuple(z, row_out);
}

}  // namespace

void register_hadamard(py::module_& m) {
  m.def("hadamard_perturb", &py_hadamard_perturb, py::arg("key"), py::arg("x"), py::arg("groups_table"),
        py::arg("level_first"), py::arg("level_count"), py::arg("field") = py::none(),
        py::arg("groups") = py::none(), py::arg("rows") = py::none(), py::arg("flip_threshold") = 0,
        py::arg("threads") = 0,
        "Hadamard-family client reports: returns (groups or None, rows uint32, bits int8 +-1). Groups and rows "
        "are drawn by the client unless given (server-assigned).");
  m.def("hadamard_first_invalid", &py_hadamard_first_invalid, py::arg("groups"), py::arg("rows"), py::arg("bits"),
        py::arg("group_rows"), py::arg("threads") = 0,
        "Index of the first report with group >= len(group_rows), row >= group_rows[group] or bit not +-1; "
        "len(rows) if all are valid.");
  m.def(
      "hadamard_accumulate", &py_hadamard_accumulate, py::arg("groups"), py::arg("rows"), py::arg("bits"),
      py::arg("cell_base"), py::arg("z"), py::arg("threads") = 0,
      "z[cell_base[groups[i]] + rows[i]] += bits[i] in place (groups None: group 0), all or nothing: ValueError "
      "(z unchanged) for a group >= len(cell_base), a cell >= len(z) or a bit other than +-1. Interrupted "
      "(Ctrl-C): z unchanged.");
  m.def("hadamard_update", &py_hadamard_update, py::arg("groups"), py::arg("rows"), py::arg("bits"),
        py::arg("group_rows"), py::arg("cell_base"), py::arg("z"), py::arg("threads") = 0,
        py::arg("group_sizes") = py::none(), py::arg("count") = py::none(),
        "Validated z[cell_base[g] + rows[i]] += bits[i] in place, all or nothing: returns len(rows) when every "
        "report is valid (group < len(group_rows), row < group_rows[group], bit +-1) and was added (then "
        "group_sizes[g] += reports of group g and count[0] += len(rows), when given), else the first invalid "
        "index with z, group_sizes and count unchanged. Each value of the report columns is read once. "
        "Interrupted (Ctrl-C): everything unchanged.");
  m.def("hadamard_update_scratch_bytes", &hadamard_update_scratch_bytes, py::arg("n"), py::arg("n_cells"),
        py::arg("n_groups"), py::arg("threads") = 0,
        "Bytes hadamard_update allocates for n reports into n_cells cells (check them against a memory budget).");
  m.def("rhr_perturb", &py_rhr_perturb, py::arg("key"), py::arg("x"), py::arg("base_bits"), py::arg("hsize"),
        py::arg("flip_threshold"), py::arg("rows") = py::none(), py::arg("threads") = 0,
        "Recursive Hadamard Response (R1 layout) client reports: returns (z uint32, rows uint32).");
}

}  // namespace ldpfast::bind
