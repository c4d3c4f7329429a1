// Like Yao apps' scripts/lib tests: `yao run` targets that call Yao's
// processes. agentbox has no models, so they are skipped with YAO_ONLY.
function TestList() {
  const models = Process("models.list");
  console.log(models);
}
