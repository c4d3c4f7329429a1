// An app script's tests (scripts/lib/math.ts), in Yao's form.
import { Sum, Mean } from "./math";

function TestSum(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(Sum([1, 2, 3]), 6);
  t.assert.Equal(Sum([]), 0);
}

function TestMean(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(Mean([2, 4]), 3);
  t.assert.Equal(Mean([]), 0, "the mean of nothing is 0");
}
