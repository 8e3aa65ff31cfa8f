// The OSCBench rating protocol's criteria as [key, label], in the order the rating form shows
// them, and the criteria that allow N/A; shared by the rating form, review and agreement pages.
export const OSC_CRITERIA = [
  ["subject", "Subject"],
  ["object", "Object"],
  ["action", "Action"],
  ["osc_accuracy", "State change: accuracy"],
  ["osc_consistency", "State change: consistency"],
  ["scene", "Scene"],
  ["realism", "Realism"],
  ["aesthetics", "Aesthetics"],
];
export const OSC_NULLABLE = new Set(["subject", "scene"]);
