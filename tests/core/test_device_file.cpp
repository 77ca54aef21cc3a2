// core/device.h (parsed once at the edge) and core/file.h (whole-file reads, atomic writes).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include <thread>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "attune/core/device.h"
#include "attune/core/error.h"
#include "attune/core/file.h"
#include "attune/core/model_hash.h"
#include "attune/core/sha256.h"

namespace attune {
namespace {

namespace fs = std::filesystem;

TEST(Device, ParsesTheFourSpellingsAndNamesABadValueAndItsField) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"auto", "auto"}, {"", "auto"}, {"cpu", "cpu"}, {"cuda", "cuda:0"}, {"cuda:0", "cuda:0"}, {"cuda:3", "cuda:3"}};
  for (const auto& [in, canonical] : ok) {
    EXPECT_EQ(Device::parse(in).str(), canonical) << in;
    EXPECT_EQ(Device::parse(canonical), Device::parse(in)) << in;
  }
  EXPECT_EQ(Device("cpu").kind, Device::Kind::Cpu);
  EXPECT_EQ(Device().kind, Device::Kind::Auto);
  for (const char* bad : {"tpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CPU", "cuda0"}) {
    try {
      Device::parse(bad);
      FAIL() << bad;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + bad + "\""), std::string::npos) << e.what();
      const auto* f = dynamic_cast<const NamesField*>(&e);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(f->field(), "device");
    }
  }
}

TEST(File, ReadsWholeFilesAndWritesAtomically) {
  const fs::path dir = fs::temp_directory_path() / ("attune_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string bytes("a\0b\xff\n", 5);
  write_file_atomic(dir / "f.bin", bytes);
  EXPECT_EQ(read_file(dir / "f.bin"), bytes);
  write_file_atomic(dir / "f.bin", "new");  // replaces
  EXPECT_EQ(read_file(dir / "f.bin"), "new");
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "f.bin");  // no temporaries left
  EXPECT_THROW(read_file(dir / "absent"), InputError);
  EXPECT_THROW(read_file(dir), InputError);                               // a directory
  EXPECT_THROW(write_file_atomic(dir / "no" / "such" / "x", "y"), Error);  // cannot write
  try {
    read_file(dir / "absent");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("absent: cannot open"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace

TEST(File, WritesThroughSymlinksAndIntoDevicesAndFifosWithoutReplacingThem) {
  const fs::path dir = fs::temp_directory_path() / ("attune_file_links_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A symlinked output: the target gets the bytes, the link stays a link.
  write_file_atomic(dir / "real.txt", "old");
  fs::create_symlink("real.txt", dir / "link.txt");
  write_file_atomic(dir / "link.txt", "through");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "link.txt")));
  EXPECT_EQ(read_file(dir / "real.txt"), "through");
  // A dangling link creates its target.
  fs::create_symlink("made.txt", dir / "dangling.txt");
  write_file_atomic(dir / "dangling.txt", "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "dangling.txt")));
  EXPECT_EQ(read_file(dir / "made.txt"), "made");
  // A character device stays a device (this would turn /dev/null into a file before).
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // /dev/full: the failed write is an error naming the path, and the device is untouched.
  if (fs::exists("/dev/full")) {
    try {
      write_file_atomic("/dev/full", std::string(1 << 16, 'x'));
      ADD_FAILURE() << "a write to /dev/full succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/dev/full: write failed"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
  // A FIFO is written in place for whoever reads it.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read_file(dir / "pipe"); });
  write_file_atomic(dir / "pipe", "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(dir / "pipe"));
  // A directory is refused.
  fs::create_directories(dir / "sub");
  EXPECT_THROW(write_file_atomic(dir / "sub", "x"), Error);
  EXPECT_TRUE(fs::is_directory(dir / "sub"));
  fs::remove_all(dir);
}


TEST(File, RemoveTreeRemovesNestedFoldersAndLinksButNotWhatTheyPointTo) {
  const fs::path dir = fs::temp_directory_path() / ("attune_remove_tree_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path tree = dir / "tree", outside = dir / "outside";
  fs::create_directories(tree / "a" / "b");
  fs::create_directories(outside);
  write_file_atomic(tree / "a" / "b" / "f.bin", "x");
  write_file_atomic(tree / "top.json", "{}");
  write_file_atomic(outside / "keep.txt", "keep");
  fs::create_symlink(outside, tree / "a" / "link_to_folder");
  fs::create_symlink(outside / "keep.txt", tree / "link_to_file");
  remove_tree(tree);
  EXPECT_FALSE(fs::exists(fs::symlink_status(tree)));
  EXPECT_EQ(read_file(outside / "keep.txt"), "keep");  // links were removed, not followed
  EXPECT_NO_THROW(remove_tree(tree));                    // nothing to remove is fine
  remove_tree(outside / "keep.txt");                     // a plain file
  EXPECT_FALSE(fs::exists(outside / "keep.txt"));
  if (::geteuid() != 0) {  // root removes anything: the refusal is only seen by other users
    fs::create_directories(tree / "locked" / "inner");
    fs::permissions(tree / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(remove_tree(tree), Error);
    fs::permissions(tree / "locked", fs::perms::owner_all);
  }
  fs::remove_all(dir);
}

TEST(ModelHash, EveryByteCountsAndDigestsAreCachedBesideTheWeights) {
  const fs::path root = fs::temp_directory_path() / ("attune_model_hash_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path a = root / "model", b = root / "copy" / "model";
  fs::create_directories(a);
  fs::create_directories(b.parent_path());
  std::string weights(3 << 20, '\0');
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 7919 % 251);
  write_file_atomic(a / "model.safetensors", weights);
  write_file_atomic(a / "config.json", "{}");
  fs::create_directories(a / "1_Pooling");
  write_file_atomic(a / "1_Pooling" / "config.json", "{\"pooling_mode_mean_tokens\": true}");
  fs::copy(a, b, fs::copy_options::recursive);
  fs::remove(b / ".attune-content-hash.json");
  const std::string ha = model_content_hash(a);
  EXPECT_EQ(ha.size(), 64u);
  EXPECT_EQ(model_content_hash(b), ha);  // same content, same folder name: same identity
  EXPECT_TRUE(fs::exists(a / ".attune-content-hash.json"));
  // One byte in the middle of the weights (the first and last MiB unchanged) is another model.
  weights[weights.size() / 2] ^= 1;
  write_file_atomic(b / "model.safetensors", weights);
  EXPECT_NE(model_content_hash(b), ha);
  // So is a pooling change, and an added file.
  weights[weights.size() / 2] ^= 1;
  write_file_atomic(b / "model.safetensors", weights);
  EXPECT_EQ(model_content_hash(b), ha);
  write_file_atomic(b / "1_Pooling" / "config.json", "{\"pooling_mode_cls_token\": true}");
  EXPECT_NE(model_content_hash(b), ha);
  // The cache is keyed by size, time and inode: a forged digest for a changed file is not used.
  auto cache = read_file(a / ".attune-content-hash.json");
  EXPECT_NE(cache.find("model.safetensors"), std::string::npos);
  write_file_atomic(a / "config.json", "{\"x\": 1}");
  EXPECT_NE(model_content_hash(a), ha);
  // Hidden files and other subfolders (a checkpoint) are not the model.
  write_file_atomic(a / "config.json", "{}");
  fs::create_directories(a / "checkpoint");
  write_file_atomic(a / "checkpoint" / "model.safetensors", "other");
  write_file_atomic(a / ".attune.lock", "123");
  EXPECT_EQ(model_content_hash(a), ha);
  EXPECT_THROW(model_content_hash(root), Error);  // no weights
  fs::remove_all(root);
}

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(Sha256().add("ab").add("c").hex(), Sha256().add("a").add("bc").hex());
}


TEST(File, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path dir = fs::temp_directory_path() / ("attune_file_fail_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file_atomic(dir / "f.txt", "old");
  // A file-size limit makes the write fail part-way, as a full disk would.
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit small = old_limit;
  small.rlim_cur = 1 << 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_file_atomic(dir / "f.txt", std::string(1 << 20, 'x'));
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find("f.txt: write failed"), std::string::npos) << message;
  EXPECT_EQ(read_file(dir / "f.txt"), "old");
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "f.txt");  // no temporaries left
  fs::remove_all(dir);
}

}  // namespace attune
