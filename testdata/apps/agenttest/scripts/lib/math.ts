export function Sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

export function Mean(xs: number[]): number {
  return xs.length ? Sum(xs) / xs.length : 0;
}
